"""`mcutrain run --method zo | bp-qas`: N training steps in QEMU against the simulated method.

The library of `mcutrain export --method ...` is cross-built with the training harness and
linked with the target's real RAM and Flash (a plan that does not fit fails to link, and the
message carries the planner's breakdown). The batches (the first steps x batch training
samples) travel to the guest as one file; after every step the guest writes losses, logits and
its saved training state, and all of it must equal the simulator's after the same step.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.cli import UserError, print_json
from mcutrain.commands._run_common import JSON_KEYS, first_mismatch, load_run_inputs, save_npz, step_result


def simulate_steps(method, batches_f: list[tuple[np.ndarray, np.ndarray]], lr: float, names: list[str]):
    """Per-step (losses, logits, tensors, rng) of the simulated method (it is stepped in place)."""
    from mcutrain.engines import int_engine
    from mcutrain.methods import zo_estimator as est

    qm = method.qm
    out = []
    for x, y in batches_f:
        base = int_engine.run(qm, int_engine.quantize_input(qm, x))
        logits = base[qm.graph.output].reshape(len(x), -1)
        losses = est.per_sample_loss(qm, logits, y).astype(np.int32)
        method.step(x, y, lr)
        tensors = {}
        for name in names:
            layer, kind = name.rsplit(".", 1)
            if kind == "weight":
                tensors[name] = qm.weights[layer].copy()
            elif kind == "bias":
                tensors[name] = qm.biases[layer].copy()
            else:   # bp-qas momentum: the C layout is the layer's weight velocity, then its bias velocity
                tensors[name] = _velocity(method, layer)
        rng = int(method.rng.state) if hasattr(method, "rng") else 0
        out.append((losses, logits.astype(np.int8), tensors, rng))
    return out


def _velocity(method, layer: str) -> np.ndarray:
    qm, v = method.qm, method.velocity
    parts = []
    if layer in method.weight_layers:
        parts.append(v.get(f"{layer}.weight", np.zeros(qm.weights[layer].size, np.float32)).reshape(-1))
    if layer in method.bias_layers:
        parts.append(v.get(f"{layer}.bias", np.zeros(qm.biases[layer].size, np.float32)).reshape(-1))
    return np.concatenate(parts).astype(np.float32)




def _float_state_diff(sim, mcu) -> tuple[int, float]:
    """(entries, largest relative difference) where the float32 momentum velocities differ.

    BP-QAS's simulator sums the conv/linear gradients with BLAS while C sums sequentially
    (docs/c-training-kernels.md): the floats may differ in the last bits even when every integer
    weight agrees. Reported, not part of `bit_exact`, until the simulator sums in the C order.
    """
    count, rel = 0, 0.0
    for (_, _, t_s, _), r in zip(sim, mcu):
        for name, v in t_s.items():
            if name.endswith(".velocity"):
                got = np.asarray(r.state[name], np.float64)
                want = np.asarray(v, np.float64)
                bad = got != want
                count += int(bad.sum())
                if bad.any():
                    d = np.abs(got - want)[bad] / np.maximum(np.abs(want[bad]), 1e-30)
                    rel = max(rel, float(np.max(d)))
    return count, rel


def json_result(r: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The `--json` result of a training run: every `JSON_KEYS` entry, then what ran.

    `method` and `batch` (and fqt's `precision` and `partial`) let a reader such as
    `mcutrain report` tell the run's settings without its command line.
    """
    doc = {k: r[k] for k in JSON_KEYS}
    doc.update(method=args.method, batch=args.batch)
    if args.method == "fqt":
        doc.update(precision=args.precision, partial=args.partial)
    return doc


def run_training(args: argparse.Namespace, work: Path, target, kernels: str) -> dict[str, Any]:
    """Export, cross-build, run and compare; the JSON result plus the arrays for --dump."""
    from mcutrain.codegen.cross import build_mcu_train, run_mcu_train
    from mcutrain.codegen.emit import ExportError
    from mcutrain.codegen.library import export_training_library
    from mcutrain.commands.export import build_method
    from mcutrain.engines import int_engine
    from mcutrain.mcu import BuildError, LinkOverflowError, QemuError, ToolchainMissingError
    from mcutrain.plan.memory import account, format_report

    ds, qm, prov = load_run_inputs(args)
    method = build_method(args, qm)
    sim_method = build_method(args, qm)
    bsz = args.batch
    batches_f = [(ds.x_train[i * bsz:(i + 1) * bsz], ds.y_train[i * bsz:(i + 1) * bsz])
                 for i in range(args.steps)]
    batches_q = [(int_engine.quantize_input(qm, x), y) for x, y in batches_f]
    try:
        res = export_training_library(method, work / "lib", batch=bsz, kernels=kernels, provenance=prov,
                                      target=target.name, lr=args.lr)
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
    names = [e.name for e in src.state]
    sim = simulate_steps(sim_method, batches_f, args.lr, names)
    mismatch = first_mismatch(sim, mcu)
    float_diff = _float_state_diff(sim, mcu)
    result = step_result(prof, target, src, b, args.steps, mismatch)
    last_sim = {k: v for k, v in sim[-1][2].items() if not k.endswith(".velocity")}
    dump_sim = {**{k: v for k, v in last_sim.items()}, "losses": np.stack([s[0] for s in sim])}
    dump_mcu = {**{k: mcu[-1].state[k] for k in last_sim}, "losses": np.stack([r.losses for r in mcu])}
    return {**result, "kernels": kernels, "provenance": prov, "mismatch": mismatch, "stack_used": stack,
            "float_state_diff": float_diff,
            "sizes": b.sizes, "src": src, "dump_sim": dump_sim, "dump_mcu": dump_mcu, "method": args.method}


def report(args: argparse.Namespace, run_on_mcu: Callable[[argparse.Namespace, Path], dict[str, Any]]) -> int:
    """Run a training run with `run_on_mcu` (the command's, handed in so this module stays below it),
    dump it for --dump and print the result; the exit status."""
    if args.dump:
        work = Path(args.dump)
        work.mkdir(parents=True, exist_ok=True)
        r = run_on_mcu(args, work / "build")
        save_npz(work / "sim.npz", **r["dump_sim"])
        save_npz(work / "mcu.npz", **r["dump_mcu"])
    else:
        from mcutrain.contain import private_dir  # removed on Ctrl-C and SIGTERM too

        with private_dir("mcutrain-run-") as tmp:
            r = run_on_mcu(args, tmp)
    if args.json:
        print_json(json_result(r, args))
    else:
        top = ", ".join(f"{k} {v:,.0f}" for k, v in list(r["per_function"].items())[:6])
        print(f"{r['target']} ({r['core']}, {r['kernels']} kernels), {r['method']}: {r['steps']} training "
              f"steps {'bit-exact' if r['bit_exact'] else 'NOT bit-exact'} with the simulator (losses, "
              f"logits, "
              f"weights, biases, RNG after every step)\n"
              f"per step: {r['instructions_per_step']:,.0f} instructions, {r['macs_per_step']:,} MACs "
              f"({r['instructions_per_mac']} instructions/MAC), est. {r['est_cycles_per_step']:,.0f} "
              f"cycles = {r['est_ms_per_step']:.3f} ms (estimate)\n"
              f"image: RAM {r['ram_bytes']:,} bytes (stack used {r['stack_used']} bytes), "
              f"Flash {r['flash_bytes']:,} bytes\ntop functions: {top}\nmodel: {r['provenance']}")
    n_diff, rel = r["float_state_diff"]
    if n_diff:
        print(f"mcutrain run: note: the float32 momentum velocity differs in {n_diff} entries (largest "
              f"relative difference {rel:.2g}): the simulator sums gradients with BLAS, C sequentially "
              "(docs/c-training-kernels.md); the integer weights, biases and losses are compared exactly",
              file=sys.stderr)
    if not r["bit_exact"]:
        print(f"mcutrain run: the MCU differs from the simulator: {r['mismatch']}", file=sys.stderr)
        return 1
    return 0
