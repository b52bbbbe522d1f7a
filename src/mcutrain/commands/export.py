"""`mcutrain export`: write a self-contained C99 library (model.c/h, runtime, build files).

The library runs int8 inference bit-exactly like the simulator and, with `--method zo`,
`--method bp-qas` or `--method fqt` (precision int8, batch 1), trains on the device exactly as
`mcutrain train` simulates it:
`model_train_step` runs the planner's schedule of the method over the planner's arena offsets,
and the training state (weights, biases, RNG, step counter) saves to a byte blob. It allocates
nothing; its kernels are the DSP ones where the target core has the DSP extension (M4, M7),
else the portable reference loops.

Examples:
    mcutrain export model.npz --target cortex-m4 -o build/model
    mcutrain export --arch digits-cnn --init random --seed 0 --target cortex-m0plus -o out --json
    mcutrain export model.npz --method zo --perturb mix --trainable last:2 --batch 4 --target nrf52840 -o out
    mcutrain export --arch digits-cnn --init random --method fqt --precision int8 --target cortex-m4 -o out
"""

from __future__ import annotations

import argparse
from typing import Any

from mcutrain.cli import UserError, print_json
from mcutrain.commands._numbers import (
    learning_rate,
    momentum,
    non_negative_int,
    positive_int,
    seed_int,
    unit_interval,
)
from mcutrain.commands._outputs import check_output

METHODS_IN_C = ("none", "zo", "bp-qas", "fqt")
"""Training methods the C code generator supports so far (none = inference only)."""


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The model source options shared by export and run."""
    p.add_argument("model", nargs="?", metavar="MODEL", help="model file (.npz); or use --arch")
    p.add_argument("--arch", help="zoo architecture instead of a model file (with --init random)")
    p.add_argument("--init", choices=["random"], help="initialization of --arch: random (He) + PTQ on "
                   "random inputs, for trying the toolchain without a trained model")
    p.add_argument("--seed", type=seed_int, default=0,
                   help="seed of --init random and of data draws (default 0)")
    p.add_argument("--method", default="none", help="training method compiled in: none (inference only, "
                   "default), zo, bp-qas or fqt")
    p.add_argument("--target", required=True, help="MCU target, e.g. cortex-m0plus, cortex-m4, cortex-m7")
    p.add_argument("--kernels", choices=["ref", "dsp"],
                   help="kernel build: dsp (default where the core has DSP) or ref (portable loops)")


def add_training_args(p: argparse.ArgumentParser, queries: int = 50) -> None:
    """The training options shared by export and run (they build the method `mcutrain train` runs)."""
    g = p.add_argument_group("training (--method zo | bp-qas | fqt)")
    g.add_argument("--trainable", default="all", help="trainable layers: all, last:N, layers:a,b "
                   "(default all)")
    g.add_argument("--batch", type=positive_int, default=1, help="samples per training step (default 1)")
    g.add_argument("--precision", default="int8", help="number format: int8 (the only one of zo and bp-qas); "
                   "fqt: int8, uint8, mixed or float32")
    g.add_argument("--queries", type=positive_int, default=queries,
                   help=f"zo: queries per layer and step (default {queries})")
    g.add_argument("--perturb", default="mix", help="zo: wp | np | mix | mix:LAYER (default mix)")
    g.add_argument("--no-gns", action="store_true", help="zo: no GNS shrink (ablation)")
    g.add_argument("--no-qas", action="store_true", help="zo / bp-qas: no QAS scaling (ablation)")
    g.add_argument("--momentum", type=momentum, default=0.0, help="bp-qas: SGD momentum (default 0)")
    g.add_argument("--bias-last", type=non_negative_int, default=0,
                   help="bp-qas: also train biases of the last N layers")
    g.add_argument("--partial", type=unit_interval, default=1.0, metavar="LAMBDA_MIN",
                   help="fqt dynamic partial updates: lambda_min in [0, 1] "
                   "(1 = off; the C step runs it at --batch 1)")
    g.add_argument("--alpha-a", type=unit_interval, default=0.1, help="fqt EMA rate of activation ranges")
    g.add_argument("--alpha-e", type=unit_interval, default=0.1, help="fqt EMA rate of error ranges")
    g.add_argument("--alpha-w", type=unit_interval, default=0.001, help="fqt EMA rate of weight ranges")
    g.add_argument("--alpha-norm", type=unit_interval, default=0.1,
                   help="fqt EMA rate of the gradient standardization statistics")


def build_method(args: argparse.Namespace, qm, calib=None, c_twin: bool = False):
    """The training method of `--method` on `qm` (None for 'none'), as `mcutrain train` builds it.

    fqt trains the float graph of `qm` from its own dynamic ranges, which start from `calib` (a few
    training samples); without them, from uniform [0, 1) inputs of `--seed`, as `--init random`'s PTQ.
    `c_twin`: the simulator a generated C step is compared with bit for bit; fqt mixed and float32
    then sum floats in the C step's sequential order (`exact_float_order`; the default is BLAS).
    """
    if args.method == "none":
        return None
    from mcutrain.methods.trainable import internal_spec, source_names_of
    try:     # an imported model's original layer names -> its IR names (idempotent)
        args.trainable = internal_spec(qm.graph, args.trainable, source_names_of(qm.provenance))
    except ValueError as e:
        raise UserError(str(e)) from None
    if args.method == "fqt":
        return _build_fqt(args, qm, calib, c_twin)
    if args.precision != "int8":
        raise UserError(f"--precision {args.precision}: {args.method} trains the int8 graph; "
                        "use --precision int8")
    if args.batch < 1:
        raise UserError(f"--batch must be at least 1, got {args.batch}")
    try:
        if args.method == "zo":
            from mcutrain.methods.zo import ZOConfig, ZOMethod
            return ZOMethod(qm, ZOConfig(trainable=args.trainable, queries=args.queries, perturb=args.perturb,
                                         gns=not args.no_gns, qas=not args.no_qas, seed=args.seed + 1))
        from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
        return BPQASMethod(qm, BPQASConfig(trainable=args.trainable, bias_last=args.bias_last,
                                           momentum=args.momentum, qas=not args.no_qas))
    except ValueError as e:
        raise UserError(str(e)) from None


def _build_fqt(args: argparse.Namespace, qm, calib, c_twin: bool = False):
    import numpy as np

    from mcutrain.methods.fqt import FQT
    from mcutrain.methods.fqt_state import FQTConfig, precision

    if args.batch < 1:
        raise UserError(f"--batch must be at least 1, got {args.batch}")
    if calib is None:
        calib = np.random.default_rng(args.seed).random((64, *qm.graph.input_shape), dtype=np.float32)
    try:
        cfg = FQTConfig(precision=args.precision, trainable=args.trainable, alpha_a=args.alpha_a,
                        alpha_e=args.alpha_e, alpha_w=args.alpha_w, alpha_norm=args.alpha_norm,
                        lambda_min=args.partial, seed=args.seed,
                        exact_float_order=c_twin and precision(args.precision).errors == "f32")
        return FQT(qm.graph, cfg, np.asarray(calib, np.float32))
    except ValueError as e:
        raise UserError(str(e)) from None


def check_method_lr(args: argparse.Namespace, command: str) -> None:
    """The per-method bound of `--lr` (`_numbers.check_lr`) when a training method is compiled in."""
    from mcutrain.commands._numbers import check_lr
    if args.method != "none":
        try:
            check_lr(args.method, args.lr, command)
        except ValueError as e:
            raise UserError(str(e)) from None


def resolve_target_and_kernels(args: argparse.Namespace):
    """(Target, kernels) from --target/--kernels; refuses methods the C side lacks."""
    from mcutrain.targets import TargetError, get_target

    if args.method not in METHODS_IN_C:
        raise UserError(f"not implemented yet for C (method {args.method}); use --method "
                        f"{', '.join(METHODS_IN_C)}")
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
    add_training_args(p)
    p.add_argument("--lr", type=learning_rate, default=0.01,
                   help="learning rate suggested in the README (the C API "
                   "takes it per step; default 0.01)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write the library to")
    p.add_argument("--planner", choices=["greedy", "linear"], default="greedy",
                   help="arena planner: greedy (default) or linear (never reuses memory; for debugging)")
    p.add_argument("--dataset", help="dataset spec to calibrate a float-only model file on (PTQ)")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(func=run)


def export(args: argparse.Namespace) -> dict[str, Any]:
    from mcutrain.codegen.emit import ExportError
    from mcutrain.codegen.library import export_library, export_training_library
    from mcutrain.codegen.model_source import ModelSourceError, resolve_model

    check_output(args.output, "-o/--output", directory=True)
    check_method_lr(args, "export")
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
        method = build_method(args, qm, None if calib is None else calib[:64])
        if method is None:
            res = export_library(qm, args.output, kernels=kernels, planner=args.planner, provenance=prov,
                                 target=target.name)
        else:
            if args.planner != "greedy":
                raise UserError("--planner linear applies to inference libraries (--method none)")
            res = export_training_library(method, args.output, batch=args.batch,
                                          kernels=kernels, provenance=prov, target=target.name, lr=args.lr)
    except (ModelSourceError, ExportError) as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(f"cannot write to '{args.output}': {e}") from None
    out = {"out_dir": str(res.out_dir), "target": target.name, "core": target.core, "kernels": kernels,
           "planner": args.planner, "arena_bytes": res.arena_bytes, "const_bytes": res.const_bytes,
           "macs": qm.graph.total_macs(), "provenance": prov, "files": res.files, "method": args.method}
    if method is not None:
        src = res.model
        s = src.plan.schedule
        out.update({"batch": args.batch, "trainable": list(s.trainable),
                    "train_arena_bytes": src.plan.arena_bytes,
                    "inference_arena_bytes": src.inference_arena_bytes,
                    "ram_weight_bytes": src.ram_weight_bytes, "state_bytes": src.state_bytes,
                    "macs_per_step": sum(s.macs_by_phase().values()), "options": src.options})
    return out


def run(args: argparse.Namespace) -> int:
    r = export(args)
    if args.json:
        print_json(r)
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
