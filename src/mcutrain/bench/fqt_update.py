"""Benchmark `fqt-update`: the FQT int8 step with the float32 and the integer-only update
(docs/integer-semantics.md 13.9) on the cores without an FPU, against the M4's portable C.

small-cnn, all 4 layers, the `mcutrain bench mcu` settings (`mcu_cases`), batch 1 and 8: the
Cortex-M4 (reference kernels, float32 update: the issue's yardstick) and the Cortex-M0+ and
RV32IMC with each update, one run each, bit-exact with the simulator, side by side in one run, so
every ratio compares counts of the same data. `--quick`: batch 1 only.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from mcutrain.bench import files
from mcutrain.bench.mcu import measure
from mcutrain.bench.mcu_cases import RISCV_VS_M4, SMALL_FQT, SMALL_FQT_BATCH

NAME = "fqt-update"
RUNS = (("cortex-m4", "float"), ("cortex-m0plus", "float"), ("cortex-m0plus", "integer"),
        ("rv32imc", "float"), ("rv32imc", "integer"))
M0PLUS_TARGETS = {1: 12.0, 8: 6.0}
"""Issue #19's FQT int8 step on the M0+, instructions/MAC by batch (the GEMMs share it)."""
KEEP = ("setting", "core", "batch", "bit_exact", "instructions_per_mac", "instructions_per_step",
        "macs_per_step", "top_functions")


def run_fqt_update(work: Path, results: Path, quick: bool = False, log=print, docs: Path = Path("docs"),
                   **_: Any) -> None:
    """Every (core, update) of `RUNS` at batch 1 and 8; ratios to the M4 row of the same batch."""
    b1 = next(c for c in SMALL_FQT if c.setting == "fqt int8, all 4 layers")
    cases = (b1,) if quick else (b1, SMALL_FQT_BATCH[0])
    rows: list[dict[str, Any]] = []
    for case in cases:
        prep, m4 = None, None
        for core, update in RUNS:
            row, prep = measure(replace(case, argv=(*case.argv, "--update", update)), core, "ref", prep, log)
            row = {k: row.get(k) for k in KEEP} | {"update": update}
            m4 = m4 or row["instructions_per_step"]
            row["vs_m4_ref"] = row["instructions_per_step"] / m4
            rows.append(row)
    integer = {(r["core"], r["batch"]): r for r in rows if r["update"] == "integer"}
    checks = {"rv32imc_integer_within": RISCV_VS_M4,
              "rv32imc_integer_met": all(r["vs_m4_ref"] <= RISCV_VS_M4 for (c, _), r in integer.items()
                                         if c == "rv32imc"),
              "m0plus_targets": M0PLUS_TARGETS,
              "m0plus_integer_met_at_batch": [b for (c, b), r in sorted(integer.items())
                                              if c == "cortex-m0plus"
                                              and r["instructions_per_mac"] <= M0PLUS_TARGETS[b]],
              "bit_exact": all(r["bit_exact"] for r in rows)}
    files.write_results(results, NAME, rows, quick, complete=True, checks=checks)
    if not quick:
        files.update_docs(docs, NAME, files.markdown_table(
            rows, ["core", "update", "batch", "instructions_per_mac", "vs_m4_ref", "bit_exact"],
            {"instructions_per_mac": ".2f", "vs_m4_ref": ".2f"}))


def register(add) -> None:
    """Hook for `mcutrain.bench`."""
    add(NAME, run_fqt_update)
