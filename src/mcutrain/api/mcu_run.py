"""Run on the emulated MCU: one path for `mcutrain run` and `mcutrain.run`.

`--method none`: N test samples go to the emulated MCU as a file (semihosting); the int8 logits
it writes back must equal the golden engine's bit for bit. `--method zo | bp-qas | fqt`: N
training steps on batches of the training set, compared after every step with the simulated
twin (`mcutrain.mcu.twin`). Instructions are counted exactly inside the marked calls and
turned into a cycle estimate (`mcutrain.mcu.cycles`).

Example:
    >>> r = mcutrain.run("model.npz", "digits-c:stripe:5", method="zo", target="nrf52840", queries=10)
    >>> r["bit_exact"]
    True
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.api.data import Model, check_fits, dataset_of, input_shape_for, options_namespace
from mcutrain.api.device import (
    budget_json,
    build_method,
    check_budget,
    check_method_lr,
    int8_model,
    library_report,
    resolve_target_and_kernels,
)
from mcutrain.api.library_manifest import write_library_record
from mcutrain.api.training import calibration_samples
from mcutrain.errors import UserError
from mcutrain.mcu.twin import first_mismatch, simulate_fqt_steps, simulate_steps
from mcutrain.methods import factory
from mcutrain.progress import Progress

JSON_KEYS = ("target", "core", "bit_exact", "steps", "instructions_per_step", "macs_per_step",
             "instructions_per_mac", "est_cycles_per_step", "est_ms_per_step", "ram_bytes", "flash_bytes",
             "per_function")
"""The keys of `--json` (in this order); `MEMORY_KEYS` follow, then a training run's configuration
(`CONFIG_KEYS`). `ram_bytes`/`flash_bytes` are the whole emulated image, harness included."""
MEMORY_KEYS = ("library_ram_bytes", "library_flash_bytes", "harness_ram_bytes", "harness_flash_bytes",
               "planned_ram_bytes", "planned_flash_bytes", "ram_limit", "flash_limit", "fits")
"""The image split into the library (what `plan` plans and the board's budget holds) and the
harness (its data buffers, newlib's stdio, 8 KB heap), with the planner's verdict on the library."""
CONFIG_KEYS = ("method", "batch", "trainable", "lr", "queries", "perturb", "precision", "partial", "update")
"""What a training run ran (zo: queries, perturb; fqt: precision, partial, update), so a reader such as
`mcutrain report` tells a run's configuration without its command line."""


def emulator_target(target):
    """`target` with the emulated board's memories, for linking the run's image.

    NOTE: the harness's own buffers are kept out of the board's budget (a firmware has no
    harness): the library was checked against `target` by the planner (`check_budget`, the
    verdict `plan` gives) before the build; the harness and newlib get the rest of the
    emulator's RAM and Flash, and `library_memory` reports the library's share as linked.
    """
    b = target.board
    return replace(target, ram_bytes=max(target.ram_bytes, b.ram_bytes),
                   flash_bytes=max(target.flash_bytes, b.flash_bytes))


def library_memory(build, lib: Path, target, kernels: str, budget) -> dict[str, Any]:
    """`MEMORY_KEYS` of a linked image: the library's own symbols (plus the stack it is planned
    with) apart from the harness, and the planner's verdict (`budget`), which alone decides."""
    from mcutrain.mcu.footprint import library_footprint
    from mcutrain.plan.memory import STACK_ALLOWANCE

    fp = library_footprint(build.elf, lib, target, kernels)
    ram, flash = fp["ram"] + STACK_ALLOWANCE, fp["flash"]
    doc = {"library_ram_bytes": ram, "library_flash_bytes": flash,
           "harness_ram_bytes": build.sizes.ram_bytes - ram,
           "harness_flash_bytes": build.sizes.flash_bytes - flash, **budget_json(budget)}
    assert tuple(doc) == MEMORY_KEYS
    return doc


def load_run_inputs(args: argparse.Namespace):
    """The dataset, the int8 model and its provenance of a `run --method ...`, checked against each other."""
    ds = dataset_of(args.dataset, args.seed, sample_shape=input_shape_for(args.dataset, args.model))
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

    ds = dataset_of(args.dataset, args.seed, sample_shape=input_shape_for(args.dataset, args.model))
    if args.steps > len(ds.y_test):
        raise UserError(f"--steps {args.steps} exceeds the {len(ds.y_test)} test samples of '{args.dataset}'")
    qm, prov = int8_model(args, ds.x_train, ds.num_classes, tuple(ds.x_test.shape[1:]))
    x = ds.x_test[:args.steps]
    check_fits(qm.graph, ds)
    x_q = int_engine.quantize_input(qm, x)
    sim = int_engine.forward(qm, x_q)
    budget = library_report(None, qm, target, kernels, 1)
    check_budget(budget, args.allow_overflow)
    try:
        with run_progress(args, 3) as stages:
            stages.stage("writing the C library")
            export_library(qm, work / "lib", kernels=kernels, provenance=prov, target=target.name)
            stages.update(1)
            stages.stage(f"cross-compiling for {target.name}")
            b = build_mcu(work / "lib", emulator_target(target), work / "model.elf", kernels=kernels)
            memory = library_memory(b, work / "lib", target, kernels, budget)
            stages.update(1)
            stages.stage(f"emulating {args.steps} inference{'s' * (args.steps != 1)} in QEMU, counting "
                         "instructions")
            mcu, prof = run_mcu(b.elf, target, x_q, qm.graph.num_classes, work / "run")
            stages.update(1)
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
    return {**result, **memory, "kernels": kernels, "provenance": prov, "logits_sim": sim, "logits_mcu": mcu}


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
    budget = library_report(method, qm, target, kernels, bsz)
    check_budget(budget, args.allow_overflow)
    with run_progress(args, 4) as stages:
        try:
            stages.stage(f"writing the C library ({args.method})")
            res = export_training_library(method, work / "lib", batch=bsz, kernels=kernels, provenance=prov,
                                          target=target.name, lr=args.lr)
            src = res.model
            # the manifest and model state-to-model reads: `--dump DIR` keeps DIR/build/lib and DIR/state.bin
            write_library_record(work / "lib", args, qm, src, kernels, target.name, prov)
            stages.update(1)
            stages.stage(f"cross-compiling for {target.name}")
            try:
                b = build_mcu_train(work / "lib", emulator_target(target), work / "train.elf",
                                    kernels=kernels)
            except LinkOverflowError as e:      # the emulator's memories: a library larger than the board's
                rep = account(src.plan.schedule, target, src.plan)
                raise UserError(f"{e}\nthe planner's breakdown:\n{format_report(rep)}") from None
            memory = library_memory(b, work / "lib", target, kernels, budget)
            stages.update(1)
            stages.stage(f"emulating {args.steps} training step{'s' * (args.steps != 1)} in QEMU, counting "
                         "instructions")
            mcu, prof, stack = run_mcu_train(b.elf, target, batches_q, args.lr, src, qm.graph.num_classes,
                                             work / "run")
            stages.update(1)
        except (ExportError, BuildError, ToolchainMissingError, QemuError, RuntimeError) as e:
            raise UserError(str(e)) from None
        stages.stage("simulating the same steps and comparing")
        if fqt:
            sim = simulate_fqt_steps(sim_method, batches_f, args.lr, src)
        else:
            sim = simulate_steps(sim_method, batches_f, args.lr, [e.name for e in src.state])
        stages.update(1)
    mismatch = first_mismatch(sim, mcu)
    result = step_result(prof, target, src, b, args.steps, mismatch)
    last_sim = sim[-1][2]
    dump_sim = {**last_sim, "losses": np.stack([s[0] for s in sim])}
    dump_mcu = {**{k: mcu[-1].state[k] for k in last_sim}, "losses": np.stack([r.losses for r in mcu])}
    return {**result, **memory, "trainable": list(src.plan.schedule.trainable), "kernels": kernels,
            "provenance": prov, "mismatch": mismatch, "stack_used": stack,
            "sizes": b.sizes, "src": src, "dump_sim": dump_sim,
            "dump_mcu": dump_mcu, "method": args.method, "state_blob": mcu[-1].blob}


def run_progress(args: argparse.Namespace, stages: int) -> Progress:
    """The stages of a run on stderr (builds and emulation take about 20 s): on only where the
    command line asked (`args.progress`, None = a bar on a terminal, plain lines elsewhere)."""
    return Progress(stages, "mcutrain run", unit="stage", show=getattr(args, "progress", False), every=0)


def run_args(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The work of `mcutrain run` in `work` on resolved options (inference or training steps)."""
    check_method_lr(args, "run")
    args.allow_overflow = getattr(args, "allow_overflow", False)    # a namespace of an older caller
    target, kernels = resolve_target_and_kernels(args)
    if args.method != "none":
        return run_training(args, work, target, kernels)
    return run_inference(args, work, target, kernels)


def run_config(r: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The `CONFIG_KEYS` a run ran with (inference: `method` 'none' only)."""
    if args.method == "none":
        return {"method": "none"}
    doc = {"method": args.method, "batch": args.batch, "trainable": r["trainable"], "lr": args.lr}
    if args.method == "zo":
        doc.update(queries=args.queries, perturb=args.perturb)
    if args.method == "fqt":
        doc.update(precision=args.precision, partial=args.partial, update=factory.fqt_update(args))
    return doc


def json_result(r: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The `--json` result of a run: every `JSON_KEYS` entry, the `MEMORY_KEYS`, then what ran."""
    return {**{k: r[k] for k in JSON_KEYS + MEMORY_KEYS}, **run_config(r, args)}


def run(model: Model | str | Path | None, dataset: str, method: str = "none", target: str = "cortex-m4",
        steps: int = 8, *, arch: str | None = None, kernels: str | None = None, allow_overflow: bool = False,
        **options: Any) -> dict[str, Any]:
    """Build for `target`, run `steps` inferences or training steps in QEMU, compare with the simulator.

    As `mcutrain run`: `options` are the training options (same defaults and checks). Returns the
    `--json` result plus, for training, `mismatch` ("" when bit-exact). A library that does not
    fit `target` is refused (UserError with the planner's breakdown) unless `allow_overflow`.
    """
    from mcutrain.contain import private_dir
    from mcutrain.options import positive_int

    try:
        steps = factory.Option("--steps", 8, "", (), type=positive_int).parse(steps)
    except factory.FactoryError as e:
        raise UserError(str(e)) from None
    args = options_namespace("run", method, options, model=None if arch else model, arch=arch,
                             init="random" if arch else None, dataset=dataset, target=target, kernels=kernels,
                             steps=steps, allow_overflow=allow_overflow)
    with private_dir("mcutrain-run-") as tmp:
        r = run_args(args, tmp)
    return {**json_result(r, args), **({"mismatch": r["mismatch"]} if "mismatch" in r else {})}
