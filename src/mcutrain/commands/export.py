"""`mcutrain export`: write a self-contained C99 library (model.c/h, runtime, build files).

The library runs int8 inference bit-exactly like the simulator; it allocates nothing and uses no
floating point. Its arena offsets are the planner's; its kernels the DSP ones where the target
core has the DSP extension (M4, M7), else the portable reference loops.

Examples:
    mcutrain export model.npz --target cortex-m4 -o build/model
    mcutrain export --arch digits-cnn --init random --seed 0 --target cortex-m0plus -o out --json
"""

from __future__ import annotations

import argparse
from typing import Any

from mcutrain.cli import UserError, print_json

METHODS_IN_C = ("none",)
"""Training methods the C code generator supports so far (none = inference only)."""


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The model source options shared by export and run."""
    p.add_argument("model", nargs="?", metavar="MODEL", help="model file (.npz); or use --arch")
    p.add_argument("--arch", help="zoo architecture instead of a model file (with --init random)")
    p.add_argument("--init", choices=["random"], help="initialization of --arch: random (He) + PTQ on "
                   "random inputs, for trying the toolchain without a trained model")
    p.add_argument("--seed", type=int, default=0, help="seed of --init random and of data draws (default 0)")
    p.add_argument("--method", default="none", help="training method compiled in (only 'none', "
                   "inference, is implemented for C so far)")
    p.add_argument("--target", required=True, help="MCU target, e.g. cortex-m0plus, cortex-m4, cortex-m7")
    p.add_argument("--kernels", choices=["ref", "dsp"],
                   help="kernel build: dsp (default where the core has DSP) or ref (portable loops)")


def resolve_target_and_kernels(args: argparse.Namespace):
    """(Target, kernels) from --target/--kernels; refuses methods the C side lacks."""
    from mcutrain.mcu import TargetError, get_target

    if args.method not in METHODS_IN_C:
        raise UserError(f"not implemented yet for C (method {args.method}); use --method none")
    try:
        target = get_target(args.target)
    except TargetError as e:
        raise UserError(str(e)) from None
    kernels = args.kernels or ("dsp" if target.dsp else "ref")
    if kernels == "dsp" and not target.dsp:
        raise UserError(f"target {target.name} ({target.core}) has no DSP extension; use --kernels ref")
    return target, kernels


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export", help="write a C library for a model and target",
        description=__doc__.split("\n\n")[0], epilog="examples:\n" + __doc__.split("Examples:\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write the library to")
    p.add_argument("--planner", choices=["greedy", "linear"], default="greedy",
                   help="arena planner: greedy (default) or linear (never reuses memory; for debugging)")
    p.add_argument("--dataset", help="dataset spec to calibrate a float-only model file on (PTQ)")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(func=run)


def export(args: argparse.Namespace) -> dict[str, Any]:
    from mcutrain.codegen.emit import ExportError
    from mcutrain.codegen.library import export_library
    from mcutrain.codegen.model_source import ModelSourceError, resolve_model

    target, kernels = resolve_target_and_kernels(args)
    calib = None
    if args.dataset:
        from mcutrain.data import load_dataset
        try:
            calib = load_dataset(args.dataset, seed=args.seed).x_train
        except ValueError as e:
            raise UserError(str(e)) from None
    try:
        qm, prov = resolve_model(args.model, args.arch, args.init, args.seed, calib_x=calib)
        res = export_library(qm, args.output, kernels=kernels, planner=args.planner, provenance=prov,
                             target=target.name)
    except (ModelSourceError, ExportError) as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(f"cannot write to '{args.output}': {e}") from None
    return {"out_dir": str(res.out_dir), "target": target.name, "core": target.core, "kernels": kernels,
            "planner": args.planner, "arena_bytes": res.arena_bytes, "const_bytes": res.const_bytes,
            "macs": qm.graph.total_macs(), "provenance": prov, "files": res.files}


def run(args: argparse.Namespace) -> int:
    r = export(args)
    if args.json:
        print_json(r)
    else:
        print(f"wrote {len(r['files'])} files to {r['out_dir']} for {r['target']} ({r['kernels']} kernels): "
              f"arena {r['arena_bytes']:,} bytes RAM, constants {r['const_bytes']:,} bytes Flash, "
              f"{r['macs']:,} MACs per inference\nmodel: {r['provenance']}\nbuild: make -C {r['out_dir']}")
    return 0
