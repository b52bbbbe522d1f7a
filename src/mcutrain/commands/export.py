"""`mcutrain export`: write a self-contained C99 library (model.c/h, runtime, build files), or
with `--format tflite | onnx` the int8 model itself as a .tflite file (TFLite Micro runs it) or
ONNX QDQ.

The library runs int8 inference bit-exactly like the simulator and, with `--method zo`,
`--method bp-qas` or `--method fqt` (precision int8, batch 1), trains on the device exactly as
`mcutrain train` simulates it:
`model_train_step` runs the planner's schedule of the method over the planner's arena offsets,
and the training state (weights, biases, RNG, step counter) saves to a byte blob. It allocates
nothing; its kernels are the DSP ones where the target core has the DSP extension (M4, M7),
else the portable reference loops. A library that `mcutrain plan` says does not fit --target
is refused, with the planner's breakdown and what to try, unless --allow-overflow.

Examples:
    mcutrain export model.npz --target cortex-m4 -o build/model
    mcutrain export --arch digits-cnn --init random --seed 0 --target cortex-m0plus -o out --json
    mcutrain export model.npz --method zo --perturb mix --trainable last:2 --batch 4 --target nrf52840 -o out
    mcutrain export --arch digits-cnn --init random --method fqt --precision int8 --target cortex-m4 -o out
    mcutrain export model.npz --target nrf52840 --prefix kws_ -o build/kws
    mcutrain export model.npz --target nrf52840 --inputs fashion-mnist -o build/model
    mcutrain export model.npz --target stm32f746 --example baremetal-stm32f746 --example zephyr -o build/model
    mcutrain export model.npz --format tflite -o model.tflite
    mcutrain export model.npz --format onnx -o model-int8.onnx
"""

from __future__ import annotations

import argparse
from typing import Any

from mcutrain.api.device import export_args, export_file_args
from mcutrain.cli import print_json
from mcutrain.codegen.examples import EXAMPLES
from mcutrain.commands._outputs import check_output
from mcutrain.errors import UserError
from mcutrain.methods import factory
from mcutrain.options import add_threads_option


def add_model_args(p: argparse.ArgumentParser, target_required: bool = True) -> None:
    """The model source options shared by export and run."""
    p.add_argument("model", nargs="?", metavar="MODEL", help="model file (.npz or a .tflite as deployed); "
                   "or use --arch")
    p.add_argument("--arch", help="zoo architecture instead of a model file (with --init random)")
    p.add_argument("--init", choices=["random"], help="initialization of --arch: random (He) + PTQ on "
                   "random inputs, for trying the toolchain without a trained model")
    p.add_argument("--method", default="none", help="training method compiled in: none (inference only, "
                   "default), zo, bp-qas or fqt")
    p.add_argument("--target", required=target_required,
                   help="MCU target: a core (cortex-m0plus, cortex-m4, cortex-m7, cortex-m33) or a board "
                   "such as nrf5340")
    p.add_argument("--kernels", choices=["ref", "dsp"],
                   help="kernel build: dsp (default where the core has DSP) or ref (portable loops)")
    add_threads_option(p)


def resolve_options(args: argparse.Namespace, command: str) -> argparse.Namespace:
    """The factory's options of `command` filled in (another method's option refused)."""
    try:
        return factory.resolve(args, command, args.method)
    except factory.FactoryError as e:
        raise UserError(str(e)) from None


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export", help="write a C library for a model and target",
        description=__doc__.split("\n\n")[0], epilog="examples:\n" + __doc__.split("Examples:\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p, target_required=False)
    factory.add_options(p.add_argument_group("training (--method zo | bp-qas | fqt)"), "export")
    p.add_argument("-o", "--output", required=True, metavar="DIR|FILE",
                   help="directory to write the library to (a file with --format)")
    p.add_argument("--format", choices=sorted(FORMATS),
                   help="write the int8 model as a .tflite file or as ONNX QDQ instead of a C library")
    p.add_argument("--planner", choices=["greedy", "linear"], default="greedy",
                   help="arena planner: greedy (default) or linear (never reuses memory; for debugging)")
    p.add_argument("--allow-overflow", action="store_true",
                   help="write the library even when the planner says it does not fit --target "
                        "(by default refused, with the breakdown and what to try)")
    p.add_argument("--prefix", metavar="PREFIX",
                   help="start every name and file of the library with PREFIX (e.g. kws_: kws_model_predict, "
                        "KWS_MODEL_INPUT_SIZE, kws_mt_* runtime, kws_model.h, target kws_model), so two "
                        "libraries link into one firmware image")
    p.add_argument("--example", action="append", choices=EXAMPLES, metavar="KIND",
                   help="also write a ready-to-build firmware layout (repeatable): "
                        f"{', '.join(EXAMPLES)} (docs/c-api.md, 'Ready-to-build examples')")
    p.add_argument("--inputs", metavar="DATASET",
                   help="also write harness/inputs.bin (16 test samples of DATASET, int8), "
                        "harness/expected_logits.bin (what model_harness must write for them) and, for "
                        "zo/bp-qas, harness/train.bin (docs/c-api.md, 'Harness files')")
    p.add_argument("--dataset", help="dataset spec (or data.npz, KIND:PATH) to calibrate a "
                                             "float-only model file on (PTQ)")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(func=run)


FORMATS = {"tflite": ".tflite", "onnx": ".onnx"}


def export(args: argparse.Namespace) -> dict[str, Any]:
    if args.format:
        if args.prefix or args.inputs or args.example:
            raise UserError("--prefix, --inputs and --example are about a C library; a --format file "
                            "is not one: leave them out")
        check_output(args.output, "-o/--output", FORMATS[args.format])
        return export_file_args(resolve_options(args, "export"))
    if args.target is None:
        raise UserError("--target is required for a C library (or pass --format tflite | onnx)")
    check_output(args.output, "-o/--output", directory=True)
    return export_args(resolve_options(args, "export"))

def run(args: argparse.Namespace) -> int:
    r = export(args)
    if args.json:
        print_json(r)
    elif args.format:
        print(f"wrote {r['path']} ({r['format']}, {r['bytes']:,} bytes)\nmodel: {r['provenance']}")
    else:
        print(f"wrote {len(r['files'])} files to {r['out_dir']} for {r['target']} ({r['kernels']} kernels): "
              f"arena {r['arena_bytes']:,} bytes RAM, constants {r['const_bytes']:,} bytes Flash, "
              f"{r['macs']:,} MACs per inference\nmodel: {r['provenance']}\nbuild: make -C {r['out_dir']}")
        if r["method"] != "none":
            print(f"training: {r['method']}, batch {r['batch']}, trainable {', '.join(r['trainable'])}; "
                  f"step arena {r['train_arena_bytes']:,} bytes (the planner's), trainable tensors "
                  f"{r['ram_weight_bytes']:,} bytes RAM, state blob {r['state_bytes']:,} bytes, "
                  f"{r['macs_per_step']:,} MACs per step")
    return 0
