"""Benchmark `memory`: RAM and Flash of one training step per method, MCUNet-5FPS and small-cnn.

Planned, not measured on a board: the arena from the planner, the rest from the accounting in
`plan.memory` (code is an estimate). Rows name their reference figure where one exists:

- Deutel et al. (seed A, IEEE TCAD 2025) report, for MCUNet-5FPS with the last two blocks
  updated, 1133.6 KB for Lin et al.'s int8 SGD+M+QAS and 739.5 KB for their own uint8 FQT on
  their MBedNet — two different networks, both in seed A's framework;
- Zhao et al. (seed B, ACM TODAES 2025) claim dense ZO training fits 1024 KB of SRAM and
  sparse ZO (first 1x1 conv of blocks 4-7) 256 KB;
- Lin et al. (NeurIPS 2022) report a 173 KB peak for their sparse update of MCUNet on the
  STM32F746 (biases of the last 22 layers; weights of blocks 7, 8, 9, 10, 12, 13's first 1x1
  conv with input-channel ratios 1, 1, 1, 1, 1/8, 1/4 in their released script; planned here
  with full ratios, so our figure is an upper bound for it).

The MCUNet rows use 128x128x3 inputs and 10 classes; batch 1 (seed A and Lin et al. train one
sample at a time on the device).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcutrain import zoo
from mcutrain.bench import files
from mcutrain.plan.memory import account
from mcutrain.plan.suggest import PlanRequest

LIN_SPARSE = "layers:blocks.7-10.pw1,blocks.12.pw1,blocks.13.pw1"
MCUNET_ROWS: list[tuple[str, PlanRequest, str, str]] = [
    ("fqt uint8, last 2 blocks", PlanRequest("fqt", "last:7", precision="uint8"), "imxrt1062",
     "seed A: 739.5 KB (uint8, its MBedNet); 1133.6 KB (Lin et al. int8 SGD+M+QAS, this net); "
     "target <= 65% of 1133.6 = 736.8 KB"),
    ("fqt mixed, last 2 blocks", PlanRequest("fqt", "last:7", precision="mixed"), "imxrt1062", ""),
    ("fqt float32, last 2 blocks", PlanRequest("fqt", "last:7", precision="float32"), "imxrt1062", ""),
    ("fqt int8, last 2 blocks", PlanRequest("fqt", "last:7", precision="int8"), "imxrt1062", ""),
    ("zo dense (all layers, mix)", PlanRequest("zo", "all", perturb="mix"), "imxrt1062",
     "seed B: fits 1024 KB"),
    ("zo sparse blocks.4-7.pw1", PlanRequest("zo", "layers:blocks.4-7.pw1", perturb="mix"), "stm32f746",
     "seed B: fits 256 KB; target < 200 KB"),
    ("bp-qas sparse (Lin et al.)", PlanRequest("bp-qas", LIN_SPARSE, bias_last=22), "stm32f746",
     "Lin et al.: 173 KB peak"),
]
SMALL_ROWS: list[tuple[str, PlanRequest, str, str]] = [
    ("fqt uint8, all 4 layers", PlanRequest("fqt", "all", precision="uint8"), "nrf52840", ""),
    ("fqt mixed, all 4 layers", PlanRequest("fqt", "all", precision="mixed"), "nrf52840", ""),
    ("fqt float32, all 4 layers", PlanRequest("fqt", "all", precision="float32"), "nrf52840", ""),
    ("zo dense (all layers, mix)", PlanRequest("zo", "all", perturb="mix"), "nrf52840", ""),
    ("zo sparse conv2, fc1", PlanRequest("zo", "layers:conv2,fc1", perturb="mix"), "rp2040", ""),
    ("bp-qas sparse (fc1, biases of 2)", PlanRequest("bp-qas", "layers:fc1", bias_last=2), "rp2040", ""),
]


def _row(model: str, label: str, req: PlanRequest, target: str, ref: str, g) -> dict[str, Any]:
    r = account(req.build(g), target)
    ram, flash, peak = r.breakdown["ram"], r.breakdown["flash"], r.breakdown["arena_at_peak"]["by_role"]
    return {"model": model, "setting": label, "options": req.options(), "target": target, "fits": r.fits,
            "ram_kb": r.ram_bytes / 1024, "flash_kb": r.flash_bytes / 1024,
            "arena_kb": ram["arena"] / 1024, "weights_ram_kb": ram["trainable weights and biases"] / 1024,
            "state_kb": ram["method state"] / 1024, "stack_kb": ram["stack allowance"] / 1024,
            "peak_by_role_kb": {k: v / 1024 for k, v in peak.items()},
            "frozen_flash_kb": flash["frozen weights and biases"] / 1024,
            "trainable_init_flash_kb": flash["trainable initial values"] / 1024,
            "code_kb_estimate": flash["code (estimate)"] / 1024,
            "macs_per_step": r.macs_per_step["total"], "reference": ref,
            "zo_base": r.schedule.options.get("base", "")}


def run_memory(work: Path, results: Path, quick: bool, log, docs: Path) -> None:
    """RAM / Flash per category of one training step: MCUNet-5FPS and small-cnn, every method."""
    size = (64, 64, 3) if quick else (128, 128, 3)
    models = [("mcunet-5fps", zoo.build("mcunet-5fps", 10, size), MCUNET_ROWS),
              ("small-cnn", zoo.build("small-cnn"), SMALL_ROWS)]
    rows: list[dict[str, Any]] = []
    for name, g, table in models:
        for label, req, target, ref in (table[:2] if quick else table):
            rows.append(_row(name, label, req, target, ref, g))
            log(f"{name:<12} {label:<34} RAM {rows[-1]['ram_kb']:9.1f} KB  Flash "
                f"{rows[-1]['flash_kb']:8.1f} KB  fits {target}: {rows[-1]['fits']}")
            files.write_results(results, "memory", rows, quick, complete=False)
    files.write_results(results, "memory", rows, quick, complete=True, input_shape=list(size), batch=1)
    if not quick:
        cols = ["model", "setting", "target", "fits", "RAM KB", "arena", "weights", "state", "stack",
                "Flash KB", "frozen", "train init", "code (est.)", "reference"]
        table_rows = [{"model": r["model"], "setting": r["setting"], "target": r["target"],
                       "fits": "yes" if r["fits"] else "no", "RAM KB": r["ram_kb"], "arena": r["arena_kb"],
                       "weights": r["weights_ram_kb"], "state": r["state_kb"], "stack": r["stack_kb"],
                       "Flash KB": r["flash_kb"], "frozen": r["frozen_flash_kb"],
                       "train init": r["trainable_init_flash_kb"], "code (est.)": r["code_kb_estimate"],
                       "reference": r["reference"]} for r in rows]
        fmt = dict.fromkeys(["RAM KB", "arena", "weights", "state", "stack", "Flash KB", "frozen",
                             "train init", "code (est.)"], ".1f")
        note = ("Planned by `mcutrain plan` (batch 1; MCUNet-5FPS at 128x128x3, 10 classes); RAM = arena + "
                "trainable weights and biases + method state + stack; Flash = frozen weights + initial "
                "values of the trainable ones + code (an estimate, see docs/planner.md). References are "
                "the papers' figures for their own frameworks (see `mcutrain/bench/memory.py`).\n\n")
        files.update_docs(docs, "memory", note + files.markdown_table(table_rows, cols, fmt))


def register(add) -> None:
    add("memory", run_memory)
