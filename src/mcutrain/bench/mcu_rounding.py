"""Benchmark `mcu-rounding`: what the `tflite` rounding mode costs on the cores, against `single`.

The same models (the same int8 weights and qparams; only `QuantModel.rounding` differs) as C
libraries on emulated Cortex-M0+ (reference kernels), M4 and M7 (DSP kernels): exact
instructions per inference sample inside `model_predict`, and per training step of ZO and
BP-QAS inside `model_train_step`, in both modes side by side, with the ratio tflite / single.
Every row is checked: inference logits against the golden engine in the row's mode, training
steps against the simulated method (losses, logits, weights, RNG after every step).

The target (issue #17): the DSP kernels within 5% of `single` in `tflite` mode. What changes is
one requantization per output (mt_fixedpoint.h: 5 instructions in both modes for the general
prepared form, 4 against 3 for the zero-point -128 form) and TFLite's ADD (three
requantizations per element against one int64 sum).

Run: ``mcutrain bench mcu-rounding`` writes `benchmarks/results/mcu-rounding.json` and its block
in `docs/benchmarks.md`; ``--quick`` (digits-cnn inference on the M4 with DSP kernels) writes
`mcu-rounding.quick.json` only. FQT int8 steps (`FQT_TRAINABLE`) are rows too: the model's own integers,
its forward in the row's mode (TFLite's ADD with multipliers computed on the device, MEAN).
Needs the ARM cross toolchain and QEMU.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import zoo
from mcutrain.bench import files
from mcutrain.engines import int_engine, ptq
from mcutrain.qmodel import QuantModel

RUNS = (("cortex-m0plus", "ref"), ("cortex-m4", "dsp"), ("cortex-m7", "dsp"))
MODES = ("single", "tflite")
LR = 0.05


@dataclass(frozen=True)
class Settings:
    """What one run measures."""

    inference: tuple[tuple[str, tuple[int, ...] | None], ...] = (
        ("digits-cnn", None), ("small-cnn", None), ("mnist1d-cnn", None), ("mcunet-5fps", (32, 32, 3)),
        ("mobilenet-v1-0.25", (48, 48, 1)))
    training: tuple[str, ...] = ("zo", "bp-qas", "fqt", "fqt-last", "fqt-mcunet")
    """Methods stepped on digits-cnn (ZO, BP-QAS and the FQT variants); fqt-mcunet on
    MCUNet-5FPS at 32x32 (`FQT_TRAINABLE`)."""
    runs: tuple[tuple[str, str], ...] = RUNS
    samples: int = 2
    steps: int = 2


FULL = Settings()
QUICK = Settings(inference=(("digits-cnn", None),), training=(), runs=(("cortex-m4", "dsp"),), samples=1)
FQT_ONLY = Settings(inference=(), training=("fqt", "fqt-last", "fqt-mcunet"))
"""The FQT rows alone (what `measure_all(FQT_ONLY, print)` measures without the rest)."""


def model(arch: str, shape: tuple[int, ...] | None, seed: int = 0) -> tuple[QuantModel, np.ndarray]:
    """A He-initialized, PTQ-calibrated model (mode single) and float inputs for it."""
    g = zoo.he_init(zoo.build(arch, 2 if arch == "mobilenet-v1-0.25" else 10, shape), seed=seed)
    x = np.random.default_rng(seed).uniform(-1, 1, (64, *g.input_shape)).astype(np.float32)
    return ptq.quantize_model(g, x), x


def inference_row(qm: QuantModel, x_q: np.ndarray, core: str, kernels: str) -> dict[str, Any]:
    """Instructions per sample of `qm`'s library on `core`, and whether its logits are the engine's."""
    from mcutrain.codegen.cross import build_mcu, run_mcu
    from mcutrain.codegen.library import export_library
    from mcutrain.targets import get_target

    target = get_target(core)
    with tempfile.TemporaryDirectory(prefix="mt-bench-rnd-") as tmp:
        export_library(qm, Path(tmp) / "lib", kernels=kernels)
        b = build_mcu(Path(tmp) / "lib", target, Path(tmp) / "m.elf", kernels=kernels)
        logits, prof = run_mcu(b.elf, target, x_q, qm.graph.num_classes, Path(tmp) / "run")
    return {"instructions": prof.region.total / len(x_q), "flash_bytes": b.sizes.flash_bytes,
            "bit_exact": bool(np.array_equal(logits, int_engine.forward(qm, x_q)))}


FQT_TRAINABLE = {"fqt": "all", "fqt-last": "last:2", "fqt-mcunet": "last:7"}
"""The FQT rows: int8 from the model's integers, trained whole, in the last layers, and MCUNet's last
two blocks (residual ADD and MEAN in the step)."""


def training_method(name: str, qm: QuantModel, x: np.ndarray):
    from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
    from mcutrain.methods.fqt import FQT
    from mcutrain.methods.fqt_state import FQTConfig
    from mcutrain.methods.zo import ZOConfig, ZOMethod
    if name == "zo":
        return ZOMethod(qm, ZOConfig(queries=4, perturb="mix", seed=5))
    if name in FQT_TRAINABLE:
        return FQT(qm, FQTConfig(precision="int8", trainable=FQT_TRAINABLE[name], seed=5), x[:8])
    return BPQASMethod(qm, BPQASConfig(trainable="all", bias_last=0, momentum=0.5))


def training_row(qm: QuantModel, name: str, x: np.ndarray, steps: int, core: str,
                 kernels: str) -> dict[str, Any]:
    """Instructions per training step of method `name` (batch 2) on `core`, checked against the simulator."""
    from mcutrain.codegen.cross import build_mcu_train, run_mcu_train
    from mcutrain.codegen.emit_fqt import quantize_input
    from mcutrain.codegen.library import export_training_library
    from mcutrain.mcu.twin import first_mismatch, simulate_fqt_steps, simulate_steps
    from mcutrain.targets import get_target

    y = np.random.default_rng(1).integers(0, qm.graph.num_classes, len(x))
    batches = [(x[2 * i:2 * i + 2], y[2 * i:2 * i + 2]) for i in range(steps)]
    target = get_target(core)
    fqt = name in FQT_TRAINABLE
    with tempfile.TemporaryDirectory(prefix="mt-bench-rnd-") as tmp:
        method = training_method(name, qm, x)
        res = export_training_library(method, Path(tmp) / "lib", batch=2, kernels=kernels)
        b = build_mcu_train(Path(tmp) / "lib", target, Path(tmp) / "t.elf", kernels=kernels)
        data = [(quantize_input(method, bx) if fqt else int_engine.quantize_input(qm, bx), by)
                for bx, by in batches]
        mcu, prof, _ = run_mcu_train(b.elf, target, data, LR, res.model, qm.graph.num_classes,
                                     Path(tmp) / "run", timeout=900)
    if fqt:
        sim = simulate_fqt_steps(training_method(name, qm, x), batches, LR, res.model)
    else:
        sim = simulate_steps(training_method(name, qm, x), batches, LR, [e.name for e in res.model.state])
    return {"instructions": prof.region.total / steps, "flash_bytes": b.sizes.flash_bytes,
            "bit_exact": not first_mismatch(sim, mcu)}


def paired(base: dict[str, Any], measure, qm: QuantModel, *args: Any) -> dict[str, Any]:
    """One row: `measure(qm in mode, *args)` in both modes, side by side, and the ratio tflite / single."""
    got = {mode: measure(replace(qm, rounding=mode), *args) for mode in MODES}
    row = dict(base)
    for mode in MODES:
        row.update({f"{mode}_{k}": v for k, v in got[mode].items()})
    row["tflite_over_single"] = got["tflite"]["instructions"] / got["single"]["instructions"]
    return row


def measure_all(st: Settings, log) -> list[dict[str, Any]]:
    rows = []
    for core, kernels in st.runs:
        for arch, shape in st.inference:
            qm, x = model(arch, shape)
            x_q = int_engine.quantize_input(qm, x[:st.samples])
            rows.append(paired({"kind": "inference", "model": arch,
                                "input": "x".join(map(str, qm.graph.input_shape)), "core": core,
                                "kernels": kernels, "per": "sample"},
                               inference_row, qm, x_q, core, kernels))
            log(_line(rows[-1]))
        for name in st.training:
            arch, shape = ("mcunet-5fps", (32, 32, 3)) if name == "fqt-mcunet" else ("digits-cnn", None)
            qm, x = model(arch, shape)
            size = "x".join(map(str, qm.graph.input_shape))
            rows.append(paired({"kind": name, "model": arch, "input": size, "core": core, "kernels": kernels,
                                "per": "step (batch 2)"},
                               training_row, qm, name, x, st.steps, core, kernels))
            log(_line(rows[-1]))
    return rows


def _line(r: dict[str, Any]) -> str:
    return (f"{r['kind']:9s} {r['model']:18s} {r['core']:13s} {r['kernels']:3s} single "
            f"{r['single_instructions']:12,.0f} tflite {r['tflite_instructions']:12,.0f} "
            f"x{r['tflite_over_single']:.4f} bit_exact={r['single_bit_exact'] and r['tflite_bit_exact']}")


FORMATS = {"single_instructions": ",.0f", "tflite_instructions": ",.0f", "tflite_over_single": ".4f"}
COLUMNS = ["kind", "model", "input", "core", "kernels", "per", "single_instructions", "tflite_instructions",
           "tflite_over_single", "single_bit_exact", "tflite_bit_exact"]


def run_mcu_rounding(work: Path, results: Path, quick: bool, log, docs: Path) -> None:
    """Instructions in QEMU of the same models in rounding single and tflite, M0+ ref, M4/M7 dsp."""
    st = QUICK if quick else FULL
    rows = measure_all(st, log)
    path = files.write_results(results, "mcu-rounding", rows, quick)
    if quick:
        log(f"wrote {path}")
        return
    dsp = [r["tflite_over_single"] for r in rows if r["kernels"] == "dsp"]
    text = ("Instructions counted exactly in QEMU (`model_predict` per sample, `model_train_step` per "
            "step), the same int8 models in rounding `single` and `tflite` (docs/integer-semantics.md "
            "6.1.1). Both modes bit-exact in every row (logits against the golden engine, training "
            "steps against the simulator). DSP kernels: tflite / single from "
            f"{min(dsp):.4f} to {max(dsp):.4f}.\n\n"
            + files.markdown_table(rows, COLUMNS, FORMATS))
    page = files.update_docs(docs, "mcu-rounding", text)
    log(f"wrote {path} and {page}")


def register(add) -> None:
    add("mcu-rounding", run_mcu_rounding)
