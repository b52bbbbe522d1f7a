"""Int8 inference on emulated Cortex-M cores: exact instructions per MAC, reference vs DSP kernels.

For each architecture (default: `small-cnn`, He init, PTQ on seeded random inputs), the
generated C library is cross-compiled for Cortex-M0+, M4, M7, M33, M55 and RV32IMC with the
portable reference kernels and, where the core has the DSP extension, the DSP kernels (on the M55
the Helium twins first; a RISC-V row also says how its count compares with the M4's portable C,
`vs_m4_ref`); QEMU runs a few samples and
the instruction-count plugin counts every executed instruction inside `model_predict` (file I/O
excluded). Instruction counts are exact and deterministic (not timings, so a loaded machine
does not disturb them); cycles and milliseconds come from the instruction-mix model of
`mcutrain.mcu.cycles` and are estimates. Every row also checks the logits against the golden
engine (bit_exact).

Per layer (`--per-layer`, DSP kernels on M4, M7 and M55, first architecture): the network cut after
each layer is run alone and consecutive totals are differenced, so each layer's count includes
its kernels' set-up but no other layer's work.

Run: ``mcutrain bench mcu-inference`` (small-cnn, digits-cnn and mnist1d-cnn, 2 samples, seed 0,
per layer for small-cnn, plus mcunet-5fps at 128x128, one sample, on the M4 reference and the
M4/M7/M33 DSP kernels: the settings of the committed result) writes
`benchmarks/results/mcu-inference.json` and the page `docs/benchmarks-mcu-inference.md` (a page
of its own, not a block of benchmarks.md). ``--quick`` (digits-cnn, one sample: M4, M33 DSP, M55
Helium, M4 reference, RV32IMC and M0+ kernels, no per-layer rows) writes `mcu-inference.quick.json` and
leaves the docs alone. Needs the ARM and RISC-V cross toolchains and QEMU.
"""

from __future__ import annotations

import platform
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mcutrain import __version__, zoo
from mcutrain.bench import files
from mcutrain.codegen.cross import build_mcu, run_mcu
from mcutrain.codegen.library import export_library
from mcutrain.codegen.model_source import resolve_model
from mcutrain.engines import int_engine, ptq
from mcutrain.graph import Graph, Op
from mcutrain.io import atomic_write_bytes
from mcutrain.mcu import estimate_cycles
from mcutrain.targets import get_target

PAGE = "benchmarks-mcu-inference.md"
RUNS = (("cortex-m0plus", "ref"), ("cortex-m4", "ref"), ("cortex-m4", "dsp"), ("cortex-m7", "ref"),
        ("cortex-m7", "dsp"), ("cortex-m33", "ref"), ("cortex-m33", "dsp"), ("cortex-m55", "ref"),
        ("cortex-m55", "dsp"))
"""The M55's 'dsp' run is its Helium build: the MVE twins first, the DSP twins elsewhere."""
RUNS += (("rv32imc", "ref"), ("rv32imafc", "ref"))   # RISC-V: portable kernels, vs the M4's (`vs_m4_ref`)


@dataclass(frozen=True)
class Settings:
    """What one run measures (the old script's options)."""

    archs: tuple[str, ...] = ("small-cnn", "digits-cnn", "mnist1d-cnn")
    samples: int = 2
    seed: int = 0
    per_layer: bool = True
    """Also count each layer of the first arch (DSP kernels, M4 and M7)."""
    runs: tuple[tuple[str, str], ...] = RUNS
    depthwise_archs: tuple[str, ...] = ("mcunet-5fps",)
    """MobileNet-style nets (depthwise convs, residual adds; mcunet-5fps at its 128x128 input), run
    on DEPTHWISE_RUNS only: the depthwise DSP twins against the portable C side by side."""


DEPTHWISE_RUNS = (("cortex-m4", "ref"), ("cortex-m4", "dsp"), ("cortex-m7", "dsp"), ("cortex-m33", "dsp"))
"""The cores of the depthwise rows (the M0+ and RISC-V portable C at 22 M MACs would take many minutes)."""
FULL = Settings()
QUICK = Settings(archs=("digits-cnn",), samples=1, per_layer=False,
                 runs=(("cortex-m4", "dsp"), ("cortex-m33", "dsp"), ("cortex-m55", "dsp"),
                       ("cortex-m4", "ref"), ("rv32imc", "ref"), ("cortex-m0plus", "ref")),
                 depthwise_archs=())


def measure(arch: str, samples: int, seed: int, runs: tuple[tuple[str, str], ...] = RUNS,
            log=print) -> list[dict]:
    """One row per (core, kernels) of `runs`: exact instructions, estimated cycles, sizes, bit-exactness."""
    qm, prov = resolve_model(arch=arch, init="random", seed=seed)
    x = np.random.default_rng(seed + 1).random((samples, *qm.graph.input_shape), dtype=np.float32)
    x_q = int_engine.quantize_input(qm, x)
    sim = int_engine.forward(qm, x_q)
    macs = qm.graph.total_macs()
    rows = []
    for target_name, kernels in runs:
        target = get_target(target_name)
        with tempfile.TemporaryDirectory(prefix="mt-bench-") as tmp:
            lib = export_library(qm, Path(tmp) / "lib", kernels=kernels, provenance=prov, target=target.name)
            b = build_mcu(Path(tmp) / "lib", target, Path(tmp) / "m.elf", kernels=kernels)
            logits, prof = run_mcu(b.elf, target, x_q, qm.graph.num_classes, Path(tmp) / "run")
            est = estimate_cycles(prof.region, target, prof.elf)
        per = prof.region.total / samples
        top = sorted(prof.region.per_function.items(), key=lambda kv: -kv[1])[:6]
        rows.append({
            "arch": arch, "target": target.name, "core": target.core, "kernels": kernels,
            "bit_exact": bool(np.array_equal(logits, sim)), "samples": samples, "macs": macs,
            "instructions": round(per, 1), "instructions_per_mac": round(per / macs, 3),
            "est_cycles": round(est.est_cycles / samples),
            "est_cycles_per_mac": round(est.est_cycles / samples / macs, 3),
            "est_ms": round(est.est_ms / samples, 3), "clock_mhz": target.clock_hz / 1e6,
            "arena_bytes": lib.arena_bytes, "const_bytes": lib.const_bytes,
            "ram_bytes": b.sizes.ram_bytes, "flash_bytes": b.sizes.flash_bytes,
            "top_functions": {k: round(v / samples) for k, v in top},
        })
        log(f"{arch:12s} {target.name:14s} {kernels:4s} {per / macs:7.3f} insn/MAC  "
            f"bit_exact={rows[-1]['bit_exact']}")
    return with_m4_ratio(rows)


def with_m4_ratio(rows: list[dict]) -> list[dict]:
    """RISC-V rows get `vs_m4_ref`: their instructions over the M4's portable C of the same run."""
    m4 = {r["arch"]: r["instructions"] for r in rows if r["core"] == "cortex-m4" and r["kernels"] == "ref"}
    for r in rows:
        if get_target(r["target"]).arch == "riscv" and r["arch"] in m4:
            r["vs_m4_ref"] = round(r["instructions"] / m4[r["arch"]], 3)
    return rows


def per_layer(arch: str, target_name: str, kernels: str, seed: int, log=print) -> list[dict]:
    """Instructions per layer of one sample: prefixes of the graph run alone, totals differenced."""
    g = zoo.build(arch, 10, None, seed=seed)
    calib = np.random.default_rng(seed).random((64, *g.input_shape), dtype=np.float32)
    x = np.random.default_rng(seed + 1).random((1, *g.input_shape), dtype=np.float32)
    target = get_target(target_name)
    rows, prev = [], 0
    for i, node in enumerate(g.nodes):
        if node.op == Op.FLATTEN:
            continue
        qm = ptq.quantize_model(Graph(g.input_shape, g.nodes[: i + 1], f"{arch}-upto-{node.name}"), calib)
        x_q = int_engine.quantize_input(qm, x)
        with tempfile.TemporaryDirectory(prefix="mt-bench-") as tmp:
            export_library(qm, Path(tmp) / "lib", kernels=kernels, provenance="prefix", target=target.name)
            b = build_mcu(Path(tmp) / "lib", target, Path(tmp) / "m.elf", kernels=kernels)
            logits, prof = run_mcu(b.elf, target, x_q, qm.graph.num_classes, Path(tmp) / "run")
        macs = g.macs(node)
        n = prof.region.total - prev
        prev = prof.region.total
        rows.append({"arch": arch, "target": target.name, "kernels": kernels, "layer": node.name,
                     "op": node.op.value, "macs": macs, "instructions": n,
                     "instructions_per_mac": round(n / macs, 3) if macs else None,
                     "bit_exact": bool(np.array_equal(logits, int_engine.forward(qm, x_q)))})
        log(f"{arch:12s} {target.name:14s} {kernels:4s} {node.name:10s} {n:10,d} instr")
    return rows


def layer_table(rows: list[dict]) -> str:
    """The per-layer section of the page."""
    lines = ["", "Per layer (the network cut after each layer, run alone, totals differenced; one sample):",
             "", "| model | core | layer | MACs | instructions | instr/MAC | bit-exact |",
             "|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        ipm = f"{r['instructions_per_mac']:.3f}" if r["instructions_per_mac"] is not None else "-"
        lines.append(f"| {r['arch']} | {r['target']} {r['kernels']} | {r['layer']} | {r['macs']:,} | "
                     f"{r['instructions']:,} | {ipm} | {'yes' if r['bit_exact'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def table(rows: list[dict]) -> str:
    """The page: the whole-network table and where the instructions go."""
    lines = ["# Benchmark: int8 inference on emulated Cortex-M cores", "",
             "Whole forward pass of one sample, instructions counted exactly in QEMU inside `model_predict`",
             "(file I/O excluded), weights He-initialized and quantized with PTQ on random inputs.",
             "Cycles and ms are estimates from the instruction-mix model (`mcutrain.mcu.cycles`), not",
             "measurements. Regenerate: `mcutrain bench mcu-inference`.", "",
             "| model | core | kernels | MACs | instructions | instr/MAC | est. cycles/MAC | est. ms | "
             "arena B | Flash B | bit-exact |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['arch']} | {r['core']} | {r['kernels']} | {r['macs']:,} | "
                     f"{r['instructions']:,.0f} | "
                     f"{r['instructions_per_mac']:.3f} | {r['est_cycles_per_mac']:.3f} | {r['est_ms']:.2f} "
                     f"(@{r['clock_mhz']:.0f} MHz) | {r['arena_bytes']:,} | {r['flash_bytes']:,} | "
                     f"{'yes' if r['bit_exact'] else 'NO'} |")
    lines += ["", "Where the instructions go (per inference, top functions):", ""]
    for r in rows:
        fns = ", ".join(f"`{k}` {v:,}" for k, v in r["top_functions"].items())
        lines.append(f"- {r['arch']} {r['core']} {r['kernels']}: {fns}")
    return "\n".join(lines) + "\n"


def run_mcu_inference(work: Path, results: Path, quick: bool, log, docs: Path) -> None:
    """Int8 inference in QEMU: exact instructions per MAC on M0+/M4/M7/M33, reference vs DSP kernels."""
    st = QUICK if quick else FULL
    rows = [r for arch in st.archs for r in measure(arch, st.samples, st.seed, st.runs, log)]
    rows += [r for arch in st.depthwise_archs for r in measure(arch, 1, st.seed, DEPTHWISE_RUNS, log)]
    layers = ([r for t in ("cortex-m4", "cortex-m7", "cortex-m55")
               for r in per_layer(st.archs[0], t, "dsp", st.seed, log)]
              if st.per_layer else [])
    path = files.write_results(results, "mcu-inference", rows, quick, layers=layers,
                                meta={"mcutrain": __version__, "python": platform.python_version(),
                                      "seed": st.seed})
    if quick:
        log(f"wrote {path}")
        return
    page = Path(docs) / PAGE
    text = table(rows) + (layer_table(layers) if layers else "")
    atomic_write_bytes(page, lambda f: f.write(text.encode()))
    log(f"wrote {path} and {page}")


def register(add) -> None:
    add("mcu-inference", run_mcu_inference)
