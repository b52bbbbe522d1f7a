"""Benchmark `mcu`: training steps measured on emulated Cortex-M0+, M4, M7 and M33 cores.

Each case (model, method, trainable part) is exported as a training library, cross-built per
core with the portable reference kernels and, on M4/M7/M33, the DSP kernels, and run for a few steps
in QEMU by `codegen.cross.run_mcu_train`, exactly as `mcutrain run --method ...` does. Every
run is compared with the simulated method after every step (losses, logits, trainable tensors,
RNG: `bit_exact`). Per row:

- instructions inside `model_train_step`, exact (counted by the TCG plugin), per step, per
  training sample and per MAC of the step (MACs from the planner's schedule, ZO queries
  included);
- cycles and milliseconds from the instruction-mix model (`mcu.cycles`, an *estimate*) at the
  clock of the board that has the core: rp2040 (M0+, 133 MHz), nrf52840 (M4, 64 MHz), imxrt1062
  (M7, 600 MHz) — the generic targets carry the same clocks;
- RAM and Flash of the linked image against the planner's (`plan.memory.account` on the board).
  The image holds more than the library: the training harness (a copy of the state blob, the
  batch's labels and logits) and newlib's semihosting I/O. The library's share is found by
  symbol: every RAM/Flash symbol of the ELF that `model.c` or the runtime defines. Linked RAM =
  the library's data + bss (arena, trainable tensors, state) + the measured stack high-water
  mark; linked Flash = the library's code, constants and initial data. The planner's RAM
  reserves an 8 KB stack allowance where the image reports the stack it used.

References (per training sample, measured on boards, the authors' own frameworks): Deutel et
al. (seed A, IEEE TCAD 2025) small CNN uint8 FQT: 35.4 ms on the M7 at 600 MHz, 897.6 ms on the
nRF52840's M4, 817.1 ms on the RP2040's M0+; MCUNet-5FPS range 192.6 ms (seed A's FQT on its
own MBedNet) to 377.6 ms (Lin et al.'s int8 SGD+M+QAS on MCUNet-5FPS) on the M7. Only FQT rows
compare like with like; the ZO and BP-QAS rows show the same reference for scale.

Targets of the issue: M4 with DSP kernels at most 1.5 instructions per MAC over a whole FQT
int8 training step; planner RAM within 5% of the linked RAM. Cases whose method has no C
code yet (FQT until it lands) are recorded as pending rows, not silently dropped.

The cases are `mcu_cases`, the symbol attribution `mcu_symbols`, the docs block `mcu_tables`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.bench import files
from mcutrain.bench.mcu_cases import (
    BOARDS,
    CASES,
    QUICK_CASES,
    SMALL_FQT_TRAINED,
    TRAINED,
    WARMUP_LAMBDA,
    Case,
    Pending,
    method_args,
)
from mcutrain.bench.mcu_symbols import instructions_by_phase
from mcutrain.bench.mcu_tables import checks, markdown
from mcutrain.mcu.footprint import library_footprint, runtime_symbols
from mcutrain.methods import factory


@dataclass
class Prepared:
    """What every run of a case shares: the model, the data and the simulated steps."""

    qm: Any
    provenance: str
    batches_f: list[tuple[np.ndarray, np.ndarray]]
    sim: dict[str, list[Any]]
    """The simulated steps per FQT update kind (`factory.fqt_update`: the cores of a case may differ)."""
    data: str
    warm: tuple[np.ndarray, np.ndarray] | None = None
    """The warm-up samples (Case.warmup), before the measured ones."""
    state: tuple[dict[str, Any], dict[str, np.ndarray]] | None = None
    """The FQT state the warm-up reached (`FQT.state()`), which every run of the case starts from."""
    sim_macs: list[dict[str, int]] = field(default_factory=list)
    """The simulator's executed MACs per phase of each measured step (partial updates skip some)."""


LR = 0.05


def prepare(case: Case) -> Prepared:
    """Model (He init + PTQ, seed 0) and the first steps x batch samples (fashion-mnist for 28x28x1)."""
    from mcutrain.codegen.model_source import resolve_model

    qm, prov = resolve_model(arch=case.model, init="random", seed=0, num_classes=10,
                             input_shape=case.input_shape)
    n, shape = case.warmup + case.steps * case.batch, qm.graph.input_shape
    x, y, data = None, None, "uniform random inputs, random labels (seed 0)"
    if shape == (28, 28, 1):
        from mcutrain.data import load_dataset
        try:
            ds = load_dataset("fashion-mnist", seed=0)
            x, y, data = ds.x_train[:n], ds.y_train[:n], "fashion-mnist training samples"
        except ValueError:
            pass
    if x is None:
        rng = np.random.default_rng(0)
        x = rng.random((n, *shape), dtype=np.float32)
        y = rng.integers(0, qm.graph.num_classes, n)
    bsz, w = case.batch, case.warmup
    batches_f = [(x[w + i * bsz:w + (i + 1) * bsz], y[w + i * bsz:w + (i + 1) * bsz])
                 for i in range(case.steps)]
    return Prepared(qm, prov, batches_f, {}, data, (x[:w], y[:w]) if w else None)


_WARM: dict[tuple[str, str, int], tuple[dict[str, Any], dict[str, np.ndarray]]] = {}


def warm_state(case: Case, prep: Prepared,
               args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The state `case.warmup` simulated steps of partial training (lambda_min WARMUP_LAMBDA, one
    sample per step, lr LR) reach from the case's initial model; shared by the case's full and
    partial rows (cached per model, precision and warm-up), so both start from the same state."""
    from mcutrain.api.device import build_method

    key = (case.model, args.precision, case.warmup)
    if key not in _WARM:
        m = build_method(argparse.Namespace(**{**vars(args), "partial": WARMUP_LAMBDA}), prep.qm)
        x, y = prep.warm
        for i in range(case.warmup):
            m.step(x[i:i + 1], y[i:i + 1], LR)
        _WARM[key] = m.state()
    return _WARM[key]


def case_method(case: Case, prep: Prepared, args: argparse.Namespace, c_twin: bool = False):
    """The case's method, at the warm-up's state when the case has one."""
    from mcutrain.api.device import build_method

    method = build_method(args, prep.qm, c_twin=c_twin)
    if case.warmup:
        prep.state = prep.state or warm_state(case, prep, args)
        method.load_state(*prep.state)
    return method


def quantize_batches(prep: Prepared, method) -> list[tuple[np.ndarray, np.ndarray]]:
    """The int8 batches the device gets: the int8 graph's input quantization, or FQT's own input range."""
    from mcutrain.engines import int_engine

    if getattr(method, "name", "") == "fqt":
        from mcutrain.codegen.emit_fqt import quantize_input  # as `mcutrain run` (float32: the float bytes)
        return [(quantize_input(method, x), y) for x, y in prep.batches_f]
    return [(int_engine.quantize_input(prep.qm, x), y) for x, y in prep.batches_f]


def simulate(prep: Prepared, args: argparse.Namespace, src, case: Case | None = None) -> list[Any]:
    """The simulated method's per-step results, as `mcutrain run` compares them (once per case).

    FQT starts from the ranges of `--init random` (uniform [0, 1) inputs of seed 0), like `run`
    without a dataset to calibrate on.
    """
    from mcutrain.api.device import build_method
    from mcutrain.mcu.twin import simulate_fqt_steps, simulate_steps

    key = factory.fqt_update(args) if args.method == "fqt" else ""
    if key not in prep.sim:
        method = (case_method(case, prep, args, c_twin=True) if case
                  else build_method(args, prep.qm, c_twin=True))
        if args.method == "fqt" and case and case.warmup:   # the MACs each measured step executed
            twin = case_method(case, prep, args, c_twin=True)
            prep.sim_macs = [dict(twin.step(x, y, LR).macs) for x, y in prep.batches_f]
        if args.method == "fqt":
            prep.sim[key] = simulate_fqt_steps(method, prep.batches_f, LR, src)
        else:
            prep.sim[key] = simulate_steps(method, prep.batches_f, LR, [e.name for e in src.state])
    return prep.sim[key]


def measure(case: Case, core: str, kernels: str, prep: Prepared | None,
            log) -> tuple[dict[str, Any], Prepared]:
    """One row: build, run in QEMU, compare with the simulator, count, estimate, plan."""
    from mcutrain.codegen.cross import build_mcu_train, run_mcu_train
    from mcutrain.codegen.emit import ExportError
    from mcutrain.codegen.library import export_training_library
    from mcutrain.errors import UserError
    from mcutrain.mcu import estimate_cycles
    from mcutrain.mcu.twin import first_mismatch
    from mcutrain.plan.memory import STACK_ALLOWANCE, account
    from mcutrain.targets import get_target

    args = method_args(case, core, kernels)
    start = time.perf_counter()
    prep = prep or prepare(case)
    target, board = get_target(core), get_target(BOARDS[core])
    with tempfile.TemporaryDirectory(prefix="mt-bench-mcu-") as tmp:
        work = Path(tmp)
        try:
            method = case_method(case, prep, args)
            res = export_training_library(method, work / "lib", batch=case.batch,
                                          kernels=kernels, provenance=prep.provenance, target=board.name,
                                          lr=LR)
        except (ExportError, UserError) as e:
            raise Pending(str(e)) from None
        src = res.model
        b = build_mcu_train(work / "lib", target, work / "train.elf", kernels=kernels)
        mcu, prof, stack = run_mcu_train(b.elf, target, quantize_batches(prep, method), LR, src,
                                         prep.qm.graph.num_classes, work / "run", timeout=case.timeout)
        est = estimate_cycles(prof.region, target, prof.elf)
        instr, steps = prof.region.total, case.steps
        first = None
        if case.steady and steps > 1:
            _, prof1, _ = run_mcu_train(b.elf, target, quantize_batches(prep, method)[:1], LR, src,
                                        prep.qm.graph.num_classes, work / "run1", timeout=case.timeout)
            est1 = estimate_cycles(prof1.region, target, prof1.elf)
            first = prof1.region.total
            instr, steps = instr - first, steps - 1
            est = replace(est, est_cycles=est.est_cycles - est1.est_cycles)
        lib = library_footprint(b.elf, work / "lib", target, kernels)
        symbols = runtime_symbols(work / "lib", target, kernels) if case.warmup else None  # while lib exists
    sim = simulate(prep, args, src, case)
    mismatch = first_mismatch(sim, mcu)
    rep = account(src.plan.schedule, board, src.plan)
    samples = steps * case.batch
    macs = int(sum(src.plan.schedule.macs_by_phase().values()))
    linked_ram = lib["ram"] + (stack or 0)
    top = sorted(prof.region.per_function.items(), key=lambda kv: -kv[1])[:5]
    row = {
        "model": case.model, "setting": case.setting, "options": " ".join(case.argv), "core": core,
        "kernels": kernels, "board": board.name, "clock_mhz": board.clock_hz / 1e6,
        "input_shape": list(prep.qm.graph.input_shape), "batch": case.batch, "steps": steps,
        "data": prep.data, "bit_exact": not mismatch, "mismatch": mismatch,
        "macs_per_step": macs, "instructions_per_step": instr / steps,
        "instructions_per_sample": instr / samples,
        "instructions_per_mac": instr / steps / macs,
        "est_cycles_per_sample": est.est_cycles / samples,
        "est_ms_per_sample": 1e3 * est.est_cycles / samples / board.clock_hz,
        "est_ms_per_sample_generic": est.est_ms / samples, "generic_clock_mhz": target.clock_hz / 1e6,
        "seed_ms": case.seed_ms.get(core), "reference": case.reference,
        "planned_ram": rep.ram_bytes, "planned_arena": rep.breakdown["ram"]["arena"],
        "planned_flash": rep.flash_bytes, "fits_board": rep.fits,
        "linked_ram": linked_ram, "linked_arena": lib["arena"], "stack_used": stack,
        "linked_flash": lib["flash"], "image_ram": b.sizes.data + b.sizes.bss + (stack or 0),
        "image_flash": b.sizes.flash_bytes,
        "ram_diff_pct": 100 * (rep.ram_bytes - linked_ram) / linked_ram,
        "planned_static_ram": rep.ram_bytes - STACK_ALLOWANCE, "linked_static_ram": lib["ram"],
        "static_ram_diff_pct": 100 * (rep.ram_bytes - STACK_ALLOWANCE - lib["ram"]) / lib["ram"],
        "flash_diff_pct": 100 * (rep.flash_bytes - lib["flash"]) / lib["flash"],
        "top_functions": {k: v / case.steps for k, v in top}, "wall_s": time.perf_counter() - start,
    }
    if case.warmup:
        row["warmup_steps"] = case.warmup
        funcs = sorted(prof.region.per_function.items(), key=lambda kv: -kv[1])
        row["per_function"] = {k: v / steps for k, v in funcs}
        row["instructions_by_phase"] = instructions_by_phase(row["per_function"], symbols)
        row["sim_macs_per_step"] = {ph: float(np.mean([m[ph] for m in prep.sim_macs]))
                                    for ph in prep.sim_macs[0]}
    if first is not None:
        row["first_step_instructions"] = first
        row["first_step_instructions_per_mac"] = first / macs     # beside the steady instructions_per_mac
        row["counted_steps"] = steps
    log(f"{case.model:<11} {case.setting:<44} {core:<13} {kernels}  {row['instructions_per_mac']:6.2f} "
        f"instr/MAC {row['est_ms_per_sample']:9.1f} ms/sample @{row['clock_mhz']:.0f} MHz  RAM "
        f"{row['ram_diff_pct']:+.1f}%  bit_exact={row['bit_exact']}  ({row['wall_s']:.0f} s)")
    return row, prep


def pending_row(case: Case, core: str, kernels: str, why: str) -> dict[str, Any]:
    return {"model": case.model, "setting": case.setting, "options": " ".join(case.argv), "core": core,
            "kernels": kernels, "board": BOARDS[core], "pending": why, "seed_ms": case.seed_ms.get(core),
            "reference": case.reference}


def run_mcu_bench(work: Path, results: Path, quick: bool, log, docs: Path) -> None:
    """Every case on its cores; results after every row; the docs table at the end (not --quick)."""
    from mcutrain.mcu import BuildError, QemuError

    rows: list[dict[str, Any]] = []
    for case in (QUICK_CASES if quick else CASES):
        prep = None
        for core, kernels in case.runs:
            try:
                row, prep = measure(case, core, kernels, prep, log)
            except Pending as e:
                row = pending_row(case, core, kernels, str(e).splitlines()[0])
                log(f"{case.model:<11} {case.setting:<44} {core:<13} {kernels}  pending: {row['pending']}")
            except (BuildError, QemuError, RuntimeError, subprocess.CalledProcessError) as e:
                # NOTE: one failed build or run must not lose the other rows; it is recorded and shown.
                row = {**pending_row(case, core, kernels, ""), "error": str(e)[:2000]}
                del row["pending"]
                log(f"{case.model:<11} {case.setting:<44} {core:<13} {kernels}  FAILED: "
                    f"{str(e).splitlines()[0]}")
            rows.append(row)
            files.write_results(results, "mcu", rows, quick, complete=False)
    files.write_results(results, "mcu", rows, quick, complete=True, lr=LR, checks=checks(rows))
    if not quick:
        files.update_docs(docs, "mcu", markdown(rows))


def run_mcu_partial(work: Path, results: Path, quick: bool, log, docs: Path) -> None:
    """The partial-update rows of `mcu` only (and their full twins), merged into mcu.json and its docs block.

    --quick: one trained-state partial step on the M4 with DSP kernels after 20 warm-up steps
    (mcu-partial.quick.json; the docs and mcu.json untouched).
    """
    from mcutrain.mcu import BuildError, QemuError

    cases = [c for c in CASES if c.warmup or "--partial" in c.argv]
    if quick:
        one = SMALL_FQT_TRAINED[1]
        cases = [replace(one, setting=one.setting.replace(TRAINED, "trained 20 steps"), warmup=20, steps=1,
                         runs=(("cortex-m4", "dsp"),))]
    new: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for case in cases:
        prep = None
        for core, kernels in case.runs:
            try:
                row, prep = measure(case, core, kernels, prep, log)
            except (Pending, BuildError, QemuError, RuntimeError, subprocess.CalledProcessError) as e:
                row = {**pending_row(case, core, kernels, ""), "error": str(e)[:2000]}
                del row["pending"]
                log(f"{case.model:<11} {case.setting:<44} {core:<13} {kernels}  FAILED: "
                    f"{str(e).splitlines()[0]}")
            new[(case.model, case.setting, core, kernels)] = row
    if quick:
        files.write_results(results, "mcu-partial", list(new.values()), True, complete=True, lr=LR)
        return
    merge_into_mcu(results, docs, list(new.values()))


def merge_into_mcu(results: Path, docs: Path, new_rows: list[dict[str, Any]]) -> None:
    """Replace the rows of the same (model, setting, core, kernels) in mcu.json, insert the others in
    case order, and rewrite the docs block from the merged rows."""
    new = {(r["model"], r["setting"], r["core"], r["kernels"]): r for r in new_rows}
    path = files.result_path(results, "mcu")
    old = json.loads(path.read_text()) if path.exists() else {"rows": [], "complete": False}
    rows = [new.pop((r["model"], r["setting"], r["core"], r["kernels"]), r) for r in old["rows"]]
    order = {(c.model, c.setting): i for i, c in enumerate(CASES)}
    for key, row in new.items():       # rows the old file lacks go after the last row of an earlier case
        at = max((i + 1 for i, r in enumerate(rows)
                  if order.get((r["model"], r["setting"]), -1) <= order[key[:2]]), default=len(rows))
        rows.insert(at, row)
    files.write_results(results, "mcu", rows, complete=old.get("complete", False), lr=LR,
                         checks=checks(rows))
    files.update_docs(docs, "mcu", markdown(rows))


def register(add) -> None:
    add("mcu", run_mcu_bench)
    add("mcu-partial", run_mcu_partial)
