"""`mcutrain run`: cross-build the C library for a Cortex-M core, run it in QEMU, compare with the simulator.

`--method none`: N test samples go to the emulated MCU as a file (semihosting); the int8 logits
it writes back must equal the golden engine's bit for bit. `--method zo | bp-qas | fqt`: N training
steps on batches of the training set; after every step the losses, logits, every trainable
weight and bias and the RNG state of the C library must equal the simulated method's (fqt: also
every dynamic range, weight scale, standardization statistic and bias scale of its state).
Instructions are counted exactly, inside the inference or training-step calls only (never file
I/O), and turned into an estimated cycle count at the target's clock with the instruction-mix
model of `mcutrain.mcu.cycles` (an estimate).

Examples:
    mcutrain run --arch digits-cnn --init random --seed 0 --dataset digits --method none \\
        --steps 8 --target cortex-m4 --dump out --json
    mcutrain run --arch digits-cnn --init random --seed 0 --dataset digits --method zo \\
        --steps 4 --target cortex-m4 --dump out --json
    mcutrain run model.npz --dataset digits --method bp-qas --batch 4 --steps 3 --target nrf52840
    mcutrain run --arch digits-cnn --init random --seed 0 --dataset digits --method fqt \
        --precision int8 --trainable all --steps 4 --target cortex-m4 --dump out --json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.cli import UserError, print_json
from mcutrain.commands._numbers import learning_rate, positive_int
from mcutrain.commands._outputs import check_output
from mcutrain.commands._run_common import JSON_KEYS, first_mismatch, load_run_inputs, save_npz, step_result
from mcutrain.commands._run_train import report, run_training
from mcutrain.commands.export import (
    add_model_args,
    add_training_args,
    build_method,
    check_method_lr,
    resolve_target_and_kernels,
)
from mcutrain.commands.train import CALIB_SAMPLES

RUN_QUERIES = 8
"""Default ZO queries of `run` (fewer than `train`'s 50: every query is a forward pass in the emulator)."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="build for a Cortex-M core, run in QEMU, compare with the simulator",
        description=__doc__.split("\n\n")[0], epilog="examples:\n" + __doc__.split("Examples:\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    add_training_args(p, queries=RUN_QUERIES)
    p.add_argument("--lr", type=learning_rate, default=0.05,
                   help="learning rate of the training steps (default 0.05)")
    p.add_argument("--dataset", required=True, help="dataset spec; inference: the first --steps test "
                   "samples; training: the first --steps x --batch training samples")
    p.add_argument("--steps", type=positive_int, default=8,
                   help="samples (inference) or training steps to run (default 8)")
    p.add_argument("--dump", metavar="DIR",
                   help="write sim.npz and mcu.npz (inference: 'logits'; training: every trainable tensor "
                        "after the last step and 'losses' per step) and keep the build here")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(func=run)


def run_on_mcu(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Do the whole run in `work`; returns the JSON result plus 'logits_sim'/'logits_mcu'."""
    from mcutrain.codegen.cross import build_mcu, run_mcu
    from mcutrain.codegen.emit import ExportError
    from mcutrain.codegen.library import export_library
    from mcutrain.codegen.model_source import ModelSourceError, resolve_model
    from mcutrain.data import load_dataset
    from mcutrain.engines import int_engine
    from mcutrain.mcu import BuildError, QemuError, ToolchainMissingError, estimate_cycles

    target, kernels = resolve_target_and_kernels(args)
    if args.method == "fqt":
        return run_fqt(args, work, target, kernels)
    if args.method != "none":
        return run_training(args, work, target, kernels)
    if args.steps < 1:
        raise UserError(f"--steps must be at least 1, got {args.steps}")
    try:
        ds = load_dataset(args.dataset, seed=args.seed)
    except ValueError as e:
        raise UserError(str(e)) from None
    if args.steps > len(ds.y_test):
        raise UserError(f"--steps {args.steps} exceeds the {len(ds.y_test)} test samples of '{args.dataset}'")
    try:
        qm, prov = resolve_model(args.model, args.arch, args.init, args.seed, ds.num_classes,
                                 tuple(ds.x_test.shape[1:]), calib_x=ds.x_train)
    except ModelSourceError as e:
        raise UserError(str(e)) from None
    x = ds.x_test[:args.steps]
    if tuple(x.shape[1:]) != qm.graph.input_shape:
        raise UserError(f"the model takes inputs {qm.graph.input_shape} but '{args.dataset}' has samples "
                        f"{tuple(x.shape[1:])}; pick a matching dataset")
    x_q = int_engine.quantize_input(qm, x)
    sim = int_engine.forward(qm, x_q)
    try:
        export_library(qm, work / "lib", kernels=kernels, provenance=prov, target=target.name)
        b = build_mcu(work / "lib", target, work / "model.elf", kernels=kernels)
        mcu, prof = run_mcu(b.elf, target, x_q, qm.graph.num_classes, work / "run")
    except (ExportError, BuildError, ToolchainMissingError, QemuError, RuntimeError) as e:
        raise UserError(str(e)) from None
    region = prof.region
    if region is None:
        raise UserError("the instruction counter saw no inference region (markers missing)")
    est = estimate_cycles(region, target, prof.elf)
    steps, macs = args.steps, qm.graph.total_macs()
    per_step = region.total / steps
    by_count = sorted(region.per_function.items(), key=lambda kv: -kv[1])
    per_function = {k: round(v / steps, 1) for k, v in by_count}
    result = {
        "target": target.name, "core": target.core, "bit_exact": bool(np.array_equal(sim, mcu)),
        "steps": steps, "instructions_per_step": round(per_step, 1), "macs_per_step": macs,
        "instructions_per_mac": round(per_step / macs, 4) if macs else None,
        "est_cycles_per_step": round(est.est_cycles / steps, 1),
        "est_ms_per_step": round(est.est_ms / steps, 4),
        "ram_bytes": b.sizes.ram_bytes, "flash_bytes": b.sizes.flash_bytes, "per_function": per_function,
    }
    assert tuple(result) == JSON_KEYS
    return {**result, "kernels": kernels, "provenance": prov, "logits_sim": sim, "logits_mcu": mcu}


def simulate_fqt_steps(method, batches_f: list[tuple[np.ndarray, np.ndarray]], lr: float, src):
    """Per-step (losses, logits, state entries, rng) of the simulated FQT (stepped in place).

    Losses and logits are those before the step's update, as the C step reports them.
    """
    from mcutrain.codegen.emit_fqt import reported_logits, state_arrays

    out = []
    for x, y in batches_f:
        logits, losses = method.logits_and_losses(x, y)
        method.step(x, y, lr)
        out.append((losses.astype(np.int32), reported_logits(method, logits), state_arrays(method, src),
                    int(method.rng.state)))
    return out


def run_fqt(args: argparse.Namespace, work: Path, target, kernels: str) -> dict[str, Any]:
    """`--method fqt`: export, cross-build, run in QEMU and compare every state entry after every step."""
    from mcutrain.codegen.cross import build_mcu_train, run_mcu_train
    from mcutrain.codegen.emit import ExportError
    from mcutrain.codegen.emit_fqt import quantize_input
    from mcutrain.codegen.library import export_training_library
    from mcutrain.mcu import BuildError, LinkOverflowError, QemuError, ToolchainMissingError
    from mcutrain.plan.memory import account, format_report

    ds, qm, prov = load_run_inputs(args)
    calib = ds.x_train[np.random.default_rng([args.seed, 3]).permutation(len(ds.x_train))[:CALIB_SAMPLES]]
    method, sim_method = build_method(args, qm, calib), build_method(args, qm, calib, c_twin=True)
    bsz = args.batch
    batches_f = [(ds.x_train[i * bsz:(i + 1) * bsz], ds.y_train[i * bsz:(i + 1) * bsz])
                 for i in range(args.steps)]
    batches_q = [(quantize_input(method, x), y) for x, y in batches_f]
    try:
        res = export_training_library(method, work / "lib", batch=bsz, kernels=kernels,
                                      provenance=prov, target=target.name, lr=args.lr)
        src = res.model
        try:
            b = build_mcu_train(work / "lib", target, work / "train.elf", kernels=kernels)
        except LinkOverflowError as e:
            rep = account(src.plan.schedule, target, src.plan)
            raise UserError(f"{e}\nthe planner's breakdown:\n{format_report(rep)}") from None
        mcu, prof, stack = run_mcu_train(b.elf, target, batches_q, args.lr, src, qm.graph.num_classes,
                                         work / "run")
    except (ExportError, BuildError, ToolchainMissingError, QemuError, RuntimeError) as e:
        raise UserError(str(e)) from None
    sim = simulate_fqt_steps(sim_method, batches_f, args.lr, src)
    mismatch = first_mismatch(sim, mcu)
    result = step_result(prof, target, src, b, args.steps, mismatch)
    dump_sim = {**sim[-1][2], "losses": np.stack([s[0] for s in sim])}
    dump_mcu = {**{k: mcu[-1].state[k] for k in sim[-1][2]}, "losses": np.stack([r.losses for r in mcu])}
    return {**result, "kernels": kernels, "provenance": prov, "mismatch": mismatch, "stack_used": stack,
            "float_state_diff": (0, 0.0), "sizes": b.sizes, "src": src, "dump_sim": dump_sim,
            "dump_mcu": dump_mcu, "method": args.method}


def run(args: argparse.Namespace) -> int:
    check_output(args.dump, "--dump", directory=True)
    check_method_lr(args, "run")
    if args.method != "none":
        return report(args, run_on_mcu)
    if args.dump:
        work = Path(args.dump)
        work.mkdir(parents=True, exist_ok=True)
        r = run_on_mcu(args, work / "build")
        save_npz(work / "sim.npz", logits=r["logits_sim"])
        save_npz(work / "mcu.npz", logits=r["logits_mcu"])
    else:
        from mcutrain.contain import private_dir  # removed on Ctrl-C and SIGTERM too

        with private_dir("mcutrain-run-") as tmp:
            r = run_on_mcu(args, tmp)
    if args.json:
        print_json({k: r[k] for k in JSON_KEYS})
    else:
        top = ", ".join(f"{k} {v:,.0f}" for k, v in list(r["per_function"].items())[:5])
        print(f"{r['target']} ({r['core']}, {r['kernels']} kernels), {r['steps']} samples: "
              f"{'bit-exact' if r['bit_exact'] else 'MISMATCH'} with the simulator\n"
              f"per inference: {r['instructions_per_step']:,.0f} instructions, {r['macs_per_step']:,} MACs "
              f"({r['instructions_per_mac']} instructions/MAC), "
              f"est. {r['est_cycles_per_step']:,.0f} cycles = {r['est_ms_per_step']:.3f} ms (estimate)\n"
              f"image: RAM {r['ram_bytes']:,} bytes, "
              f"Flash {r['flash_bytes']:,} bytes\ntop functions: {top}\nmodel: {r['provenance']}")
    if not r["bit_exact"]:
        bad = np.argwhere(r["logits_sim"] != r["logits_mcu"])
        print(f"mcutrain run: the MCU's logits differ from the simulator's in {len(bad)} places, first at "
              f"sample {bad[0][0]}, class {bad[0][1]}", file=sys.stderr)
        return 1
    return 0
