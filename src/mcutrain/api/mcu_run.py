"""Run on the emulated MCU: one path for `mcutrain run` and `mcutrain.run`.

`--method none`: N test samples go to the emulated MCU as a file (semihosting); the int8 logits
it writes back must equal the golden engine's bit for bit. `--method zo | bp-qas | fqt`: N
training steps on batches of the training set, compared after every step with the simulated
twin (`mcutrain.mcu.twin`). Instructions are counted exactly inside the marked calls and
turned into a cycle estimate (`mcutrain.mcu.cycles`).

Example:
    >>> r = mcutrain.run("model.npz", "digits-c:stripe:5", method="zo", target="nrf52840", steps=3, batch=4)
    >>> r["bit_exact"]
    True
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.api.data import Model, check_fits, dataset_of, options_namespace
from mcutrain.api.device import build_method, check_method_lr, int8_model, resolve_target_and_kernels
from mcutrain.api.library_manifest import write_library_record
from mcutrain.api.training import calibration_samples
from mcutrain.errors import UserError
from mcutrain.mcu.twin import first_mismatch, float_state_diff, simulate_fqt_steps, simulate_steps
from mcutrain.methods import factory

JSON_KEYS = ("target", "core", "bit_exact", "steps", "instructions_per_step", "macs_per_step",
             "instructions_per_mac", "est_cycles_per_step", "est_ms_per_step", "ram_bytes", "flash_bytes",
             "per_function")
"""The keys of `--json` (in this order); a training run adds `method`, `batch` and, for fqt,
`precision` and `partial` after them (`json_result`)."""


def load_run_inputs(args: argparse.Namespace):
    """The dataset, the int8 model and its provenance of a `run --method ...`, checked against each other."""
    ds = dataset_of(args.dataset, args.seed)
    n = args.steps * args.batch
    if n > len(ds.y_train):
        raise UserError(f"--steps {args.steps} x --batch {args.batch} exceeds the {len(ds.y_train)} training "
                        f"samples of '{args.dataset}'")
    qm, prov = int8_model(args, ds.x_train, ds.num_classes, tuple(ds.x_train.shape[1:]))
    check_fits(qm.graph, ds)
    return ds, qm, prov


def step_result(prof, target, src, build, steps: int, mismatch) -> dict[str, Any]:
    """The `--json` keys of a training run: counted instructions of the marked step region."""
    from mcutrain.mcu import estimate_cycles

    region = prof.region
    if region is None:
        raise UserError("the instruction counter saw no training-step region (markers missing)")
    est = estimate_cycles(region, target, prof.elf)
    macs = int(sum(src.plan.schedule.macs_by_phase().values()))
    per_step = region.total / steps
    by_count = sorted(region.per_function.items(), key=lambda kv: -kv[1])
    result = {
        "target": target.name, "core": target.core, "bit_exact": not mismatch, "steps": steps,
        "instructions_per_step": round(per_step, 1), "macs_per_step": macs,
        "instructions_per_mac": round(per_step / macs, 4) if macs else None,
        "est_cycles_per_step": round(est.est_cycles / steps, 1),
        "est_ms_per_step": round(est.est_ms / steps, 4),
        "ram_bytes": build.sizes.ram_bytes, "flash_bytes": build.sizes.flash_bytes,
        "per_function": {k: round(v / steps, 1) for k, v in by_count},
    }
    assert tuple(result) == JSON_KEYS
    return result


def run_inference(args: argparse.Namespace, work: Path, target, kernels: str) -> dict[str, Any]:
    """`--method none`: the JSON result plus 'logits_sim'/'logits_mcu'."""
    from mcutrain.codegen.cross import build_mcu, run_mcu
    from mcutrain.codegen.emit import ExportError
    from mcutrain.codegen.library import export_library
    from mcutrain.engines import int_engine
    from mcutrain.mcu import BuildError, QemuError, ToolchainMissingError, estimate_cycles

    ds = dataset_of(args.dataset, args.seed)
    if args.steps > len(ds.y_test):
        raise UserError(f"--steps {args.steps} exceeds the {len(ds.y_test)} test samples of '{args.dataset}'")
    qm, prov = int8_model(args, ds.x_train, ds.num_classes, tuple(ds.x_test.shape[1:]))
    x = ds.x_test[:args.steps]
    check_fits(qm.graph, ds)
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


def run_training(args: argparse.Namespace, work: Path, target, kernels: str) -> dict[str, Any]:
    """`--method zo | bp-qas | fqt`: export, cross-build, run in QEMU and compare every step with the twin.

    Returns the JSON result plus the arrays for --dump. fqt's ranges start from training samples
    (as `train`); its twin sums floats in the C order (`c_twin`).
    """
    from mcutrain.codegen.cross import build_mcu_train, run_mcu_train
    from mcutrain.codegen.emit import ExportError
    from mcutrain.codegen.emit_fqt import quantize_input
    from mcutrain.codegen.library import export_training_library
    from mcutrain.engines import int_engine
    from mcutrain.mcu import BuildError, LinkOverflowError, QemuError, ToolchainMissingError
    from mcutrain.plan.memory import account, format_report

    ds, qm, prov = load_run_inputs(args)
    fqt = args.method == "fqt"
    calib = calibration_samples(ds.x_train, args.seed) if fqt else None
    method, sim_method = build_method(args, qm, calib), build_method(args, qm, calib, c_twin=fqt)
    bsz = args.batch
    batches_f = [(ds.x_train[i * bsz:(i + 1) * bsz], ds.y_train[i * bsz:(i + 1) * bsz])
                 for i in range(args.steps)]
    batches_q = [(quantize_input(method, x) if fqt else int_engine.quantize_input(qm, x), y)
                 for x, y in batches_f]
    try:
        res = export_training_library(method, work / "lib", batch=bsz, kernels=kernels, provenance=prov,
                                      target=target.name, lr=args.lr)
        src = res.model
        # the manifest and model state-to-model reads: `--dump DIR` keeps DIR/build/lib with DIR/state.bin
        write_library_record(work / "lib", args, qm, src, kernels, target.name, prov)
        try:
            b = build_mcu_train(work / "lib", target, work / "train.elf", kernels=kernels)
        except LinkOverflowError as e:
            rep = account(src.plan.schedule, target, src.plan)
            raise UserError(f"{e}\nthe planner's breakdown:\n{format_report(rep)}") from None
        mcu, prof, stack = run_mcu_train(b.elf, target, batches_q, args.lr, src, qm.graph.num_classes,
                                         work / "run")
    except (ExportError, BuildError, ToolchainMissingError, QemuError, RuntimeError) as e:
        raise UserError(str(e)) from None
    if fqt:
        sim = simulate_fqt_steps(sim_method, batches_f, args.lr, src)
        float_diff = (0, 0.0)
    else:
        sim = simulate_steps(sim_method, batches_f, args.lr, [e.name for e in src.state])
        float_diff = float_state_diff(sim, mcu)
    mismatch = first_mismatch(sim, mcu)
    result = step_result(prof, target, src, b, args.steps, mismatch)
    last_sim = {k: v for k, v in sim[-1][2].items() if not k.endswith(".velocity")}
    dump_sim = {**last_sim, "losses": np.stack([s[0] for s in sim])}
    dump_mcu = {**{k: mcu[-1].state[k] for k in last_sim}, "losses": np.stack([r.losses for r in mcu])}
    return {**result, "kernels": kernels, "provenance": prov, "mismatch": mismatch, "stack_used": stack,
            "float_state_diff": float_diff, "sizes": b.sizes, "src": src, "dump_sim": dump_sim,
            "dump_mcu": dump_mcu, "method": args.method, "state_blob": mcu[-1].blob}


def run_args(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The work of `mcutrain run` in `work` on resolved options (inference or training steps)."""
    check_method_lr(args, "run")
    target, kernels = resolve_target_and_kernels(args)
    if args.method != "none":
        return run_training(args, work, target, kernels)
    return run_inference(args, work, target, kernels)


def json_result(r: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The `--json` result of a run: every `JSON_KEYS` entry, then (training) what ran.

    `method` and `batch` (and fqt's `precision` and `partial`) let a reader such as
    `mcutrain report` tell the run's settings without its command line.
    """
    doc = {k: r[k] for k in JSON_KEYS}
    if args.method != "none":
        doc.update(method=args.method, batch=args.batch)
        if args.method == "fqt":
            doc.update(precision=args.precision, partial=args.partial)
    return doc


def run(model: Model | str | Path | None, dataset: str, method: str = "none", target: str = "cortex-m4",
        steps: int = 8, *, arch: str | None = None, kernels: str | None = None,
        **options: Any) -> dict[str, Any]:
    """Build for `target`, run `steps` inferences or training steps in QEMU, compare with the simulator.

    As `mcutrain run`: `options` are the training options (same defaults and checks). Returns the
    `--json` result plus, for training, `mismatch` ("" when bit-exact).
    """
    from mcutrain.contain import private_dir
    from mcutrain.options import positive_int

    try:
        steps = factory.Option("--steps", 8, "", (), type=positive_int).parse(steps)
    except factory.FactoryError as e:
        raise UserError(str(e)) from None
    args = options_namespace("run", method, options, model=None if arch else model, arch=arch,
                             init="random" if arch else None, dataset=dataset, target=target, kernels=kernels,
                             steps=steps)
    with private_dir("mcutrain-run-") as tmp:
        r = run_args(args, tmp)
    return {**json_result(r, args), **({"mismatch": r["mismatch"]} if "mismatch" in r else {})}
