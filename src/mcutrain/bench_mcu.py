"""Benchmark `mcu`: training steps measured on emulated Cortex-M0+, M4 and M7 cores.

Each case (model, method, trainable part) is exported as a training library, cross-built per
core with the portable reference kernels and, on M4/M7, the DSP kernels, and run for a few steps
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

from mcutrain import bench

BOARDS = {"cortex-m0plus": "rp2040", "cortex-m4": "nrf52840", "cortex-m7": "imxrt1062"}
"""The board whose clock (and RAM, for the planner's fit) each core's rows are quoted at."""

ALL_RUNS = (("cortex-m0plus", "ref"), ("cortex-m4", "ref"), ("cortex-m4", "dsp"), ("cortex-m7", "ref"),
            ("cortex-m7", "dsp"))
M7_RUNS = (("cortex-m7", "ref"), ("cortex-m7", "dsp"))

SEED_SMALL_MS = {"cortex-m0plus": 817.1, "cortex-m4": 897.6, "cortex-m7": 35.4}
"""Seed A, small CNN, uint8 FQT, ms per training sample (RP2040, nRF52840, i.MX RT1062)."""
SEED_MCUNET = "192.6-377.6 ms (M7)"

LIN_SPARSE = "layers:blocks.7-10.pw1,blocks.12.pw1,blocks.13.pw1"
"""Lin et al.'s sparse update of MCUNet-5FPS (weights; input-channel ratios taken as 1)."""

TARGET_INSTR_PER_MAC = 1.5
TARGET_RAM_PCT = 5.0


@dataclass(frozen=True)
class Case:
    """One training setting measured on several cores: `argv` are `mcutrain run` method options."""

    model: str
    setting: str
    argv: tuple[str, ...]
    runs: tuple[tuple[str, str], ...] = ALL_RUNS
    input_shape: tuple[int, int, int] | None = None
    batch: int = 2
    steps: int = 1
    seed_ms: dict[str, float] = field(default_factory=dict)
    reference: str = ""
    steady: bool = False
    """Per-step figures from the steps after the first: the ELF also runs the first step alone and
    its count is subtracted (FQT's first step at batch > 1 seeds the error ranges over the batch)."""
    forward_proxy: bool = False
    """While the case cannot run in C: estimate its step from the measured int8 forward pass (valid
    for ZO, whose step is forward passes and queries; not for back-propagation)."""
    warmup: int = 0
    """FQT: simulated steps (one sample each, partial updates at WARMUP_LAMBDA) before the measured
    ones; the library is exported from the state they reach (see `warm_state`)."""


def _fqt(setting: str, precision: str, partial: bool, batch: int = 1, steps: int = 4,
         runs: tuple[tuple[str, str], ...] = ALL_RUNS, warmup: int = 0) -> Case:
    """Small-cnn FQT: one sample per step, as seed A trains; four steps, since dynamic partial
    updates keep every structure on the first sample (its loss is the largest seen so far).
    With a batch, two steps, counted after the first (which seeds the error ranges from the whole
    batch: up to one forward and error pass of every sample per error tensor)."""
    argv = ("--method", "fqt", "--precision", precision, "--trainable", "all")
    return Case("small-cnn", setting, argv + (("--partial", "0.1") if partial else ()), batch=batch,
                steps=steps, runs=runs, seed_ms=SEED_SMALL_MS, steady=batch > 1, warmup=warmup,
                reference="seed A, uint8 FQT" if precision == "uint8" and not partial and batch == 1
                and not warmup else "")


SMALL_FQT = [_fqt(f"fqt {p}, all 4 layers{', partial 0.1' if part else ''}", p, part)
             for p in ("uint8", "int8", "float32") for part in (False, True)]
SMALL_FQT_BATCH = [_fqt("fqt int8, all 4 layers, batch 8", "int8", False, batch=8, steps=2),
                   _fqt("fqt int8, all 4 layers, batch 32", "int8", False, batch=32, steps=2,
                        runs=(("cortex-m4", "dsp"), ("cortex-m7", "dsp")))]
"""Mini-batch SGD: gradients of the batch's samples accumulate, the float32 update runs once per step."""
WARMUP = 200
WARMUP_LAMBDA = 0.1
TRAINED = f"trained {WARMUP} steps"
SMALL_FQT_TRAINED = [_fqt(f"fqt {p}, all 4 layers, {TRAINED}{', partial 0.1' if part else ''}", p, part,
                          warmup=WARMUP) for p in ("int8", "uint8", "float32") for part in (False, True)]
"""Partial updates as in training: from the state {WARMUP} simulated steps of partial training at
lambda_min 0.1 reach (so the largest loss seen is an earlier sample's and the loss ratio of the
measured samples is below 1), the same four samples full and partial."""
MCUNET_SIZE = (128, 128, 3)
CASES: list[Case] = [
    Case("small-cnn", "zo mix, all 4 layers, 8 queries",
         ("--method", "zo", "--perturb", "mix", "--queries", "8", "--trainable", "all"),
         seed_ms=SEED_SMALL_MS),
    Case("small-cnn", "bp-qas, all 4 layers",
         ("--method", "bp-qas", "--trainable", "all"), seed_ms=SEED_SMALL_MS),
    *SMALL_FQT,
    *SMALL_FQT_BATCH,
    *SMALL_FQT_TRAINED,
    Case("mcunet-5fps", "zo mix, sparse blocks.4-7.pw1, 8 queries",
         ("--method", "zo", "--perturb", "mix", "--queries", "8", "--trainable", "layers:blocks.4-7.pw1"),
         runs=M7_RUNS, input_shape=MCUNET_SIZE, batch=1, steps=1, reference="seed B's sparse ZO",
         forward_proxy=True),
    Case("mcunet-5fps", "bp-qas sparse (Lin et al.), momentum 0.9",
         ("--method", "bp-qas", "--trainable", LIN_SPARSE, "--bias-last", "22", "--momentum", "0.9"),
         runs=M7_RUNS, input_shape=MCUNET_SIZE, batch=1, steps=1,
         reference="Lin et al. int8 SGD+M+QAS: 377.6 ms"),
    Case("mcunet-5fps", "fqt uint8, last 2 blocks",
         ("--method", "fqt", "--precision", "uint8", "--trainable", "last:7"), runs=M7_RUNS,
         input_shape=MCUNET_SIZE, batch=1, steps=1, reference="seed A: 192.6 ms (its MBedNet)"),
    Case("mcunet-5fps", "fqt int8, last 2 blocks",
         ("--method", "fqt", "--precision", "int8", "--trainable", "last:7"), runs=M7_RUNS,
         input_shape=MCUNET_SIZE, batch=1, steps=1),
]
QUICK_CASES: list[Case] = [
    Case("small-cnn", "zo mix, all 4 layers, 2 queries",
         ("--method", "zo", "--perturb", "mix", "--queries", "2", "--trainable", "all"),
         runs=(("cortex-m4", "dsp"),), batch=1, steps=1, seed_ms=SEED_SMALL_MS),
    Case("small-cnn", "fqt int8, fc2",
         ("--method", "fqt", "--precision", "int8", "--trainable", "layers:fc2"),
         runs=(("cortex-m0plus", "ref"),), batch=1, steps=1, seed_ms=SEED_SMALL_MS),
]


class Pending(Exception):
    """The case's method has no C training code yet (or its options are not accepted by `run`)."""


def method_args(case: Case, core: str, kernels: str) -> argparse.Namespace:
    """The `mcutrain run` namespace of `case` on `core`; raises Pending if `run` cannot do it yet."""
    from mcutrain.cli import UserError
    from mcutrain.commands.export import add_model_args, add_training_args, resolve_target_and_kernels

    p = argparse.ArgumentParser(exit_on_error=False, add_help=False)
    add_model_args(p)
    add_training_args(p, queries=8)
    argv = ["--arch", case.model, "--init", "random", "--seed", "0", "--target", core, "--kernels", kernels,
            "--batch", str(case.batch), *case.argv]
    try:
        args, extra = p.parse_known_args(argv)
    except argparse.ArgumentError as e:
        raise Pending(f"run does not take these options yet: {e}") from None
    if extra:
        raise Pending(f"run does not take {' '.join(extra)} yet")
    try:
        resolve_target_and_kernels(args)
    except UserError as e:
        raise Pending(str(e)) from None
    return args


@dataclass
class Prepared:
    """What every run of a case shares: the model, the data and the simulated steps."""

    qm: Any
    provenance: str
    batches_f: list[tuple[np.ndarray, np.ndarray]]
    sim: list[Any]
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
    return Prepared(qm, prov, batches_f, [], data, (x[:w], y[:w]) if w else None)


_WARM: dict[tuple[str, str, int], tuple[dict[str, Any], dict[str, np.ndarray]]] = {}


def warm_state(case: Case, prep: Prepared,
               args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The state `case.warmup` simulated steps of partial training (lambda_min WARMUP_LAMBDA, one
    sample per step, lr LR) reach from the case's initial model; shared by the case's full and
    partial rows (cached per model, precision and warm-up), so both start from the same state."""
    from mcutrain.commands.export import build_method

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
    from mcutrain.commands.export import build_method

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
    from mcutrain.commands._run_train import _simulate
    from mcutrain.commands.export import build_method

    if not prep.sim:
        method = (case_method(case, prep, args, c_twin=True) if case
                  else build_method(args, prep.qm, c_twin=True))
        if args.method == "fqt" and case and case.warmup:   # the MACs each measured step executed
            twin = case_method(case, prep, args, c_twin=True)
            prep.sim_macs = [dict(twin.step(x, y, LR).macs) for x, y in prep.batches_f]
        if args.method == "fqt":
            from mcutrain.commands.run import _simulate_fqt
            prep.sim = _simulate_fqt(method, prep.batches_f, LR, src)
        else:
            prep.sim = _simulate(method, prep.batches_f, LR, [e.name for e in src.state])
    return prep.sim


_RUNTIME_NAMES: dict[tuple[str, bool, str], dict[str, str]] = {}


def runtime_names(lib: Path, target, kernels: str) -> frozenset[str]:
    """Symbols the runtime sources define for this build kind (compiled to objects once per kind).

    The runtime is the same package data in every library, so its names are cached per (core,
    float ABI, kernels); `model.c` differs per library and is read by `model_names`.
    """
    return frozenset(runtime_symbols(lib, target, kernels))


def runtime_symbols(lib: Path, target, kernels: str) -> dict[str, str]:
    """Symbol -> the runtime source (file stem) that defines it, static helpers included."""
    from mcutrain.mcu import find_toolchain
    from mcutrain.mcu.toolchain import core_flags

    key = (target.core, target.fpu, kernels)
    if key in _RUNTIME_NAMES:
        return _RUNTIME_NAMES[key]
    tools = find_toolchain()
    flags = [*core_flags(target), "-O2", "-std=c99", "-ffunction-sections", "-fdata-sections",
             f"-I{lib}", f"-I{lib / 'runtime'}"] + (["-DMT_KERNELS_REF"] if kernels == "ref" else [])
    with tempfile.TemporaryDirectory(prefix="mt-names-") as tmp:
        srcs = [str(s) for s in sorted((lib / "runtime").glob("*.c"))]
        subprocess.run([tools.gcc, *flags, "-c", *srcs], cwd=tmp, check=True, capture_output=True)
        out = subprocess.run([tools.nm, "--defined-only", *sorted(str(p) for p in Path(tmp).glob("*.o"))],
                             check=True, capture_output=True, text=True).stdout
    table: dict[str, str] = {}
    stem = ""
    for line in out.splitlines():        # nm of several objects: "file.o:" opens each one's symbols
        if line.endswith(".o:"):
            stem = Path(line[:-1]).stem
        elif len(line.split()) == 3:
            table.setdefault(line.split()[-1], stem)
    _RUNTIME_NAMES[key] = table
    return table


def phase_of(name: str, stem: str) -> str:
    """The step phase of a function (its name, then the runtime source that defines it): forward
    kernels (and the GEMMs, windows and conv helpers they call), backward kernels (error
    propagation, weight gradients, masks, prescale, top-k), or the rest (loss, update, ranges,
    multipliers, and anything outside the runtime: model.c, libc, libgcc)."""
    if "bwd" in name or "_keep" in name or "topk" in name or "prescale" in name:
        return "backward"
    if "fwd" in name:
        return "forward"
    if "_bwd" in stem or stem.endswith("_keep") or stem.startswith(("mt_fqt_topk", "mt_fqt_prescale")):
        return "backward"
    if "_fwd" in stem or stem.startswith(("mt_mat_mult", "mt_conv_")):
        return "forward"
    return "other"


def instructions_by_phase(per_function: dict[str, float], symbols: dict[str, str]) -> dict[str, float]:
    out = {"forward": 0.0, "backward": 0.0, "other": 0.0}
    for name, count in per_function.items():
        out[phase_of(name, symbols.get(name, ""))] += count
    return out


def model_names(lib: Path, target) -> set[str]:
    from mcutrain.mcu import find_toolchain
    from mcutrain.mcu.toolchain import core_flags

    tools = find_toolchain()
    with tempfile.TemporaryDirectory(prefix="mt-names-") as tmp:
        obj = Path(tmp) / "model.o"
        subprocess.run([tools.gcc, *core_flags(target), "-O2", "-std=c99", "-fdata-sections",
                        "-ffunction-sections", f"-I{lib}", f"-I{lib / 'runtime'}", "-c", str(lib / "model.c"),
                        "-o", str(obj)], check=True, capture_output=True)
        out = subprocess.run([tools.nm, "--defined-only", str(obj)], check=True, capture_output=True,
                             text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3}


def library_footprint(elf: Path, lib: Path, target, kernels: str) -> dict[str, int]:
    """RAM and Flash bytes of the library's own symbols in the linked image (harness and libc excluded).

    Symbols are matched by name: those `model.c` and the runtime define. Anonymous constants
    (string literals, jump tables outside functions) are not attributed; the library has few.
    """
    from mcutrain.mcu import find_toolchain

    names = model_names(lib, target) | runtime_names(lib, target, kernels)
    out = subprocess.run([find_toolchain().nm, "-S", "--defined-only", str(elf)], check=True,
                         capture_output=True, text=True).stdout
    ram_origin = target.board.ram_origin
    ram = flash = arena = 0
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 4 or parts[3] not in names:
            continue
        addr, size, kind = int(parts[0], 16), int(parts[1], 16), parts[2].lower()
        if addr >= ram_origin and kind in "bd":
            ram += size
            arena += size if parts[3] == "model_arena" else 0
        if addr < ram_origin or kind == "d":
            flash += size
    return {"ram": ram, "flash": flash, "arena": arena}


def measure(case: Case, core: str, kernels: str, prep: Prepared | None,
            log) -> tuple[dict[str, Any], Prepared]:
    """One row: build, run in QEMU, compare with the simulator, count, estimate, plan."""
    from mcutrain.cli import UserError
    from mcutrain.codegen.cross import build_mcu_train, run_mcu_train
    from mcutrain.codegen.emit import ExportError
    from mcutrain.codegen.library import export_training_library
    from mcutrain.commands._run_train import _first_mismatch
    from mcutrain.mcu import estimate_cycles, get_target
    from mcutrain.plan.memory import STACK_ALLOWANCE, account

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
                                         prep.qm.graph.num_classes, work / "run", timeout=900)
        est = estimate_cycles(prof.region, target, prof.elf)
        instr, steps = prof.region.total, case.steps
        first = None
        if case.steady and steps > 1:
            _, prof1, _ = run_mcu_train(b.elf, target, quantize_batches(prep, method)[:1], LR, src,
                                        prep.qm.graph.num_classes, work / "run1", timeout=900)
            est1 = estimate_cycles(prof1.region, target, prof1.elf)
            first = prof1.region.total
            instr, steps = instr - first, steps - 1
            est = replace(est, est_cycles=est.est_cycles - est1.est_cycles)
        lib = library_footprint(b.elf, work / "lib", target, kernels)
    sim = simulate(prep, args, src, case)
    mismatch = _first_mismatch(sim, mcu)
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
        row["instructions_by_phase"] = instructions_by_phase(row["per_function"],
                                                             runtime_symbols(work / "lib", target, kernels))
        row["sim_macs_per_step"] = {ph: float(np.mean([m[ph] for m in prep.sim_macs]))
                                    for ph in prep.sim_macs[0]}
    if first is not None:
        row["first_step_instructions"] = first
        row["counted_steps"] = steps
    log(f"{case.model:<11} {case.setting:<44} {core:<13} {kernels}  {row['instructions_per_mac']:6.2f} "
        f"instr/MAC {row['est_ms_per_sample']:9.1f} ms/sample @{row['clock_mhz']:.0f} MHz  RAM "
        f"{row['ram_diff_pct']:+.1f}%  bit_exact={row['bit_exact']}  ({row['wall_s']:.0f} s)")
    return row, prep


def forward_proxy(case: Case, core: str, kernels: str, log) -> dict[str, Any]:
    """An estimated row: the int8 forward pass measured in QEMU, scaled to the ZO step's planned MACs.

    A ZO step is a forward pass plus queries that re-run the net from the perturbed layer, so
    its kernels are the forward kernels; the estimate assumes their instructions per MAC hold
    for the partial passes and leaves out the perturbation and update kernels (a few % of a
    small-cnn ZO step).
    """
    from mcutrain.codegen.cross import build_mcu, run_mcu
    from mcutrain.codegen.library import export_library
    from mcutrain.codegen.model_source import resolve_model
    from mcutrain.engines import int_engine
    from mcutrain.mcu import estimate_cycles, get_target
    from mcutrain.plan.memory import account

    args = method_args(case, core, kernels)
    start = time.perf_counter()
    qm, prov = resolve_model(arch=case.model, init="random", seed=0, num_classes=10,
                             input_shape=case.input_shape)
    x_q = int_engine.quantize_input(qm, np.random.default_rng(0).random((1, *qm.graph.input_shape),
                                                                         dtype=np.float32))
    target, board = get_target(core), get_target(BOARDS[core])
    with tempfile.TemporaryDirectory(prefix="mt-bench-mcu-") as tmp:
        export_library(qm, Path(tmp) / "lib", kernels=kernels, provenance=prov, target=board.name)
        b = build_mcu(Path(tmp) / "lib", target, Path(tmp) / "m.elf", kernels=kernels)
        logits, prof = run_mcu(b.elf, target, x_q, qm.graph.num_classes, Path(tmp) / "run")
        est = estimate_cycles(prof.region, target, prof.elf)
    from mcutrain.commands.export import build_method
    from mcutrain.plan.schedules import schedule_for

    rep = account(schedule_for(build_method(args, qm), batch=case.batch), board)
    fwd_macs, step_macs = qm.graph.total_macs(), rep.macs_per_step["total"]
    ipm = prof.region.total / fwd_macs
    row = {"model": case.model, "setting": case.setting, "options": " ".join(case.argv), "core": core,
           "kernels": kernels, "board": board.name, "clock_mhz": board.clock_hz / 1e6,
           "input_shape": list(qm.graph.input_shape), "batch": case.batch, "estimated_from_forward": True,
           "forward_bit_exact": bool(np.array_equal(logits, int_engine.forward(qm, x_q))),
           "forward_macs": fwd_macs, "forward_instructions": prof.region.total,
           "forward_instructions_per_mac": ipm, "macs_per_step": step_macs,
           "est_instructions_per_sample": ipm * step_macs / case.batch,
           "est_ms_per_sample": 1e3 * est.est_cycles / fwd_macs * step_macs / case.batch / board.clock_hz,
           "reference": case.reference, "planned_ram": rep.ram_bytes, "planned_flash": rep.flash_bytes,
           "fits_board": rep.fits, "wall_s": time.perf_counter() - start}
    log(f"{case.model:<11} {case.setting:<44} {core:<13} {kernels}  forward {ipm:6.2f} instr/MAC -> est. "
        f"{row['est_ms_per_sample']:9.1f} ms/sample @{row['clock_mhz']:.0f} MHz (from the forward pass)")
    return row


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
            if "pending" in row and case.forward_proxy:
                try:
                    rows.append(forward_proxy(case, core, kernels, log))
                except (BuildError, QemuError, RuntimeError, subprocess.CalledProcessError) as e:
                    log(f"{case.model:<11} {case.setting:<44} forward estimate FAILED: "
                        f"{str(e).splitlines()[0]}")
            bench.write_results(results, "mcu", rows, quick, complete=False)
    bench.write_results(results, "mcu", rows, quick, complete=True, lr=LR, checks=checks(rows))
    if not quick:
        bench.update_docs(docs, "mcu", markdown(rows))


def checks(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's two targets, evaluated on the measured rows (None where no row applies yet).

    The instruction target is per whole step, so it is given per batch size: the update runs once
    per step (its float32 passes over every weight are 1.5 instructions/MAC alone at batch 1 on the
    M4) and its share falls as 1 / batch. `target_met` is that of the largest measured batch, the
    batch the simulator's FQT benchmarks train with (32); the batch-1 figure is kept beside it.
    """
    done = [r for r in rows if "bit_exact" in r]
    m4 = {int(r["batch"]): r["instructions_per_mac"] for r in done
          if r["model"] == "small-cnn" and r["core"] == "cortex-m4" and r["kernels"] == "dsp"
          and r["options"].startswith("--method fqt --precision int8") and "--partial" not in r["options"]
          and not r["setting"].endswith(TRAINED)}
    worst = max((abs(r["ram_diff_pct"]) for r in done), default=None)
    largest = max(m4, default=None)
    one = [r for r in done if r["model"] == "small-cnn" and r["core"] == "cortex-m4" and r["kernels"] == "dsp"
           and r["setting"] == "fqt int8, all 4 layers" and r["batch"] == 1]
    upd = one[0].get("top_functions", {}).get("mt_fqt_upd_s8") if one else None
    return {"m4_dsp_fqt_int8_instr_per_mac": m4.get(1),
            "m4_dsp_fqt_int8_instr_per_mac_by_batch": {str(b): v for b, v in sorted(m4.items())},
            "m4_dsp_fqt_int8_target_met": (m4[largest] <= TARGET_INSTR_PER_MAC) if m4 else None,
            "m4_dsp_fqt_int8_update_per_mac": upd / one[0]["macs_per_step"] if upd is not None else None,
            "m4_dsp_fqt_int8_target_met_at_batch": [b for b, v in sorted(m4.items())
                                                    if v <= TARGET_INSTR_PER_MAC],
            "worst_ram_diff_pct": worst,
            "ram_target_met": (worst <= TARGET_RAM_PCT) if worst is not None else None}


def markdown(rows: list[dict[str, Any]]) -> str:
    """The docs block: one table of measured rows, the pending cases, the checks."""
    ref = {(r["model"], r["setting"], r["core"]): r["instructions_per_step"] for r in rows
           if "bit_exact" in r and r["kernels"] == "ref"}
    table = []
    for r in rows:
        if "bit_exact" not in r:
            continue
        base = ref.get((r["model"], r["setting"], r["core"]))
        table.append({
            "model": r["model"] + ("" if r["model"] == "small-cnn" else f" {r['input_shape'][0]}x"
                                   f"{r['input_shape'][1]}"),
            "setting": r["setting"], "core": f"{r['core'].removeprefix('cortex-')} {r['kernels']}",
            "batch": r["batch"], "MACs/step": f"{r['macs_per_step']:,}",
            "instr/sample": f"{r['instructions_per_sample'] / 1e6:,.2f} M",
            "instr/MAC": r["instructions_per_mac"],
            "ref/dsp": (base / r["instructions_per_step"]) if (base and r["kernels"] == "dsp") else None,
            "est. ms/sample": f"{r['est_ms_per_sample']:,.1f} @{r['clock_mhz']:.0f} MHz",
            "seed ms": r["seed_ms"] if r["seed_ms"] is not None else (SEED_MCUNET if r["model"] != "small-cnn"
                                                                      else None),
            "RAM plan/linked KB": f"{r['planned_ram'] / 1024:.1f} / {r['linked_ram'] / 1024:.1f}",
            "RAM diff": f"{r['ram_diff_pct']:+.1f}%",
            "Flash plan/linked KB": f"{r['planned_flash'] / 1024:.1f} / {r['linked_flash'] / 1024:.1f}",
            "Flash diff": f"{r['flash_diff_pct']:+.1f}%", "fits board": "yes" if r["fits_board"] else "no",
            "bit-exact": "yes" if r["bit_exact"] else "NO"})
    cols = list(table[0]) if table else ["model"]
    text = [
        "Training steps in C under QEMU (`mcutrain bench mcu`); untrained He-initialized models (PTQ on "
        "random inputs); one step of batch 2 per row, FQT four steps of one sample (per-sample figures "
        "average them), FQT int8 batch 8 and 32 two steps each, counted without the first (which seeds "
        "the error ranges over the whole batch, once per training run): per sample and per MAC, the "
        "update (once per step, after the batch's gradients are summed) is divided over the step's "
        "samples. "
        "Instructions: exact counts inside "
        "`model_train_step`; ms are **estimates** from the instruction-mix model at the board's clock "
        "(M0+ rp2040 133 MHz, M4 nrf52840 64 MHz, M7 imxrt1062 600 MHz; the generic targets carry the "
        "same clocks). MACs per step are the planner's, ZO queries included. ref/dsp: instructions of the "
        "reference kernels over the DSP kernels. Seed ms: Deutel et al. (seed A) measured per sample for "
        "uint8 FQT (small CNN) — like for like only in FQT rows; MCUNet-5FPS: 192.6 ms (seed A, its "
        "MBedNet) to 377.6 ms (Lin et al.'s int8 SGD+M+QAS). RAM: planned (arena + trainable tensors + "
        "state + 8 KB stack allowance, on the board) vs linked (the library's data + bss in the ELF + the "
        "measured stack); Flash: planned (code estimated) vs the library's linked code, constants and "
        "initial data. Bit-exact: losses, logits and every state entry equal the simulator's after "
        "every step" + ("" if all(r["bit_exact"] for r in rows if "bit_exact" in r) else
                        " (rows marked NO do not; see `mismatch` in the JSON)") + ". Small-cnn rows train on "
        "Fashion-MNIST samples (when installed); FQT starts from ranges calibrated on uniform inputs.", "",
        bench.markdown_table(table, cols, {"instr/MAC": ".2f", "ref/dsp": ".2f"})]
    proxy = [{"model": f"{r['model']} {r['input_shape'][0]}x{r['input_shape'][1]}", "setting": r["setting"],
              "core": f"{r['core'].removeprefix('cortex-')} {r['kernels']}",
              "forward instr/MAC": r["forward_instructions_per_mac"], "step MACs": f"{r['macs_per_step']:,}",
              "est. instr/sample": f"{r['est_instructions_per_sample'] / 1e6:,.1f} M",
              "est. ms/sample": f"{r['est_ms_per_sample']:,.1f} @{r['clock_mhz']:.0f} MHz",
              "seed ms": SEED_MCUNET, "RAM plan KB": f"{r['planned_ram'] / 1024:.1f}",
              "fits board": "yes" if r["fits_board"] else "no",
              "forward bit-exact": "yes" if r["forward_bit_exact"] else "NO"}
             for r in rows if r.get("estimated_from_forward")]
    if proxy:
        text += ["", "Estimated from the measured int8 forward pass (the case cannot run in C yet, see "
                 "Pending): a ZO step is forward passes and partial forward queries, so the forward "
                 "kernels' instructions and estimated cycles per MAC are scaled to the planner's MACs of "
                 "the step (perturbation and update kernels left out).", "",
                 bench.markdown_table(proxy, list(proxy[0]), {"forward instr/MAC": ".2f"})]
    part = partial_table(rows)
    if part:
        text += ["", PARTIAL_TEXT, "", bench.markdown_table(part, list(part[0]), {"step speedup": ".2f",
                                                                              "backward speedup": ".2f",
                                                                              "MACs ratio": ".2f"})]
        prof = profile_table(rows)
        if prof:
            what = f"{PROFILE_OF[0]} on {PROFILE_OF[1]} {PROFILE_OF[2]}"
            text += ["", f"Per-function profile of one step, {what} ({TRAINED}; instructions per step, "
                     "the largest in either):", "",
                     bench.markdown_table(prof, list(prof[0]))]
    pend = {f"{r['model']} {r['setting']}": r["pending"] for r in rows if "pending" in r}
    if pend:
        by_why: dict[str, list[str]] = {}
        for what, why in pend.items():
            by_why.setdefault(why, []).append(what)
        text += ["", "Pending (not measurable in C yet):"] + [f"- {why}: {'; '.join(whats)}."
                                                            for why, whats in by_why.items()]
    failed = [f"{r['model']} {r['setting']} on {r['core']} {r['kernels']}: {r['error'].splitlines()[0]}"
              for r in rows if "error" in r]
    if failed:
        text += ["", "Failed (see `benchmarks/results/mcu.json`): " + "; ".join(failed) + "."]
    c = checks(rows)
    by_batch = c["m4_dsp_fqt_int8_instr_per_mac_by_batch"]
    text += ["", "Targets: M4 DSP FQT int8 step <= 1.5 instructions/MAC: "
             + (", ".join(f"{v:.2f} at batch {b}" for b, v in by_batch.items())
                + f" ({'met' if c['m4_dsp_fqt_int8_target_met'] else 'NOT met'} at the training batch"
                + (f"; met at batch {', '.join(map(str, c['m4_dsp_fqt_int8_target_met_at_batch']))}"
                   if c["m4_dsp_fqt_int8_target_met_at_batch"] else "")
                + (f"; at batch 1 the float32 update alone is {c['m4_dsp_fqt_int8_update_per_mac']:.2f}/MAC"
                   if c["m4_dsp_fqt_int8_update_per_mac"] is not None else "") + ")" if by_batch
                else "pending (FQT in C)")
             + "; planner RAM within 5% of linked: worst "
             + (f"{c['worst_ram_diff_pct']:.1f}% ({'met' if c['ram_target_met'] else 'NOT met'})"
                if c["worst_ram_diff_pct"] is not None else "—") + "."]
    return "\n".join(text)


PARTIAL_TEXT = (
    f"Dynamic partial updates on the device (lambda_min 0.1): small-cnn from the state {WARMUP} simulated "
    "steps of partial training reach (Fashion-MNIST samples 0-199, one per step, lr 0.05; the largest "
    "loss seen is an earlier sample's, as in training), then the same four samples (200-203) with full "
    "and with partial updates, each bit-exact with the simulator. Per step: instructions of the whole "
    "step, of the backward kernels (error propagation, weight gradients, ReLU and pool masks, prescale, "
    "top-k) and of the rest (forward kernels excluded: loss, update, ranges, bias rescale, helpers); "
    "MACs ratio: the simulator's executed backward MACs (error + weight gradient), full / partial. The "
    "output layer always trains fully (seed A).")
PROFILE_OF = ("fqt int8, all 4 layers", "cortex-m4", "dsp")


def _precision(options: str) -> str:
    words = options.split()
    return words[words.index("--precision") + 1] if "--precision" in words else ""


def partial_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Full vs partial rows of the same trained state, per precision and core."""
    warm = {(r["options"], r["core"], r["kernels"]): r for r in rows
            if r.get("warmup_steps") and "bit_exact" in r}
    out = []
    for (opts, core, kern), p in warm.items():
        f = warm.get((opts.replace(" --partial 0.1", ""), core, kern))
        if "--partial" not in opts or f is None:
            continue
        fb, pb = f["instructions_by_phase"], p["instructions_by_phase"]
        fm, pm = f["sim_macs_per_step"], p["sim_macs_per_step"]
        out.append({"precision": _precision(opts), "core": f"{core.removeprefix('cortex-')} {kern}",
                    "instr/step full": f"{f['instructions_per_step'] / 1e6:,.2f} M",
                    "instr/step partial": f"{p['instructions_per_step'] / 1e6:,.2f} M",
                    "step speedup": f["instructions_per_step"] / p["instructions_per_step"],
                    "backward full / partial": f"{fb['backward'] / 1e6:,.2f} / {pb['backward'] / 1e6:,.2f} M",
                    "backward speedup": fb["backward"] / pb["backward"],
                    "rest full / partial": f"{fb['other'] / 1e6:,.2f} / {pb['other'] / 1e6:,.2f} M",
                    "forward": f"{fb['forward'] / 1e6:,.2f} M",
                    "MACs ratio": (fm["error"] + fm["weight_grad"]) / (pm["error"] + pm["weight_grad"]),
                    "bit-exact": "yes" if f["bit_exact"] and p["bit_exact"] else "NO"})
    return out


def profile_table(rows: list[dict[str, Any]], top: int = 14) -> list[dict[str, Any]]:
    """The per-function instructions of PROFILE_OF's full and partial rows side by side."""
    setting, core, kern = PROFILE_OF
    pick = {("--partial" in r["options"]): r for r in rows if r.get("per_function") and r["core"] == core
            and r["kernels"] == kern and r["setting"].startswith(setting)}
    if len(pick) < 2:
        return []
    full, part = pick[False]["per_function"], pick[True]["per_function"]
    names = sorted(set(full) | set(part), key=lambda k: -max(full.get(k, 0), part.get(k, 0)))[:top]
    return [{"function": f"`{k}`", "full": f"{full.get(k, 0):,.0f}", "partial": f"{part.get(k, 0):,.0f}"}
            for k in names]


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
        bench.write_results(results, "mcu-partial", list(new.values()), True, complete=True, lr=LR)
        return
    merge_into_mcu(results, docs, list(new.values()))


def merge_into_mcu(results: Path, docs: Path, new_rows: list[dict[str, Any]]) -> None:
    """Replace the rows of the same (model, setting, core, kernels) in mcu.json, insert the others in
    case order, and rewrite the docs block from the merged rows."""
    new = {(r["model"], r["setting"], r["core"], r["kernels"]): r for r in new_rows}
    path = bench.result_path(results, "mcu")
    old = json.loads(path.read_text()) if path.exists() else {"rows": [], "complete": False}
    rows = [new.pop((r["model"], r["setting"], r["core"], r["kernels"]), r) for r in old["rows"]]
    order = {(c.model, c.setting): i for i, c in enumerate(CASES)}
    for key, row in new.items():       # rows the old file lacks go after the last row of an earlier case
        at = max((i + 1 for i, r in enumerate(rows)
                  if order.get((r["model"], r["setting"]), -1) <= order[key[:2]]), default=len(rows))
        rows.insert(at, row)
    bench.write_results(results, "mcu", rows, complete=old.get("complete", False), lr=LR, checks=checks(rows))
    bench.update_docs(docs, "mcu", markdown(rows))


def register(add) -> None:
    add("mcu", run_mcu_bench)
    add("mcu-partial", run_mcu_partial)
