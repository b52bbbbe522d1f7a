"""Benchmark `mcu-partial`: the full/partial table of the trained-state rows and the merge of rerun
rows into mcu.json (pure Python: rows written by hand)."""

from __future__ import annotations

import json

import pytest

from mcutrain import bench
from mcutrain.bench.mcu import merge_into_mcu
from mcutrain.bench.mcu_cases import SMALL_FQT_TRAINED
from mcutrain.bench.mcu_tables import markdown, partial_table


def _row(case, core: str, kernels: str, total: float, fwd: float, bwd: float, macs: tuple[int, int]) -> dict:
    return {"model": case.model, "setting": case.setting, "options": " ".join(case.argv), "core": core,
            "kernels": kernels, "board": "nrf52840", "clock_mhz": 64.0, "input_shape": [28, 28, 1],
            "batch": 1,
            "steps": 4, "bit_exact": True, "macs_per_step": 3_344_148, "instructions_per_step": total,
            "instructions_per_sample": total, "instructions_per_mac": total / 3_344_148,
            "est_ms_per_sample": 1.0, "seed_ms": 897.6, "planned_ram": 1024, "linked_ram": 1000,
            "ram_diff_pct": 2.4, "planned_flash": 2048, "linked_flash": 2000, "flash_diff_pct": 2.4,
            "fits_board": True, "warmup_steps": 200,
            "instructions_by_phase": {"forward": fwd, "backward": bwd, "other": total - fwd - bwd},
            "sim_macs_per_step": {"forward": 1_117_056, "error": macs[0], "weight_grad": macs[1]},
            "per_function": {"mt_fqt_upd_s8": total - fwd - bwd, "mt_conv2d_fwd_s8_range": fwd}}


def test_partial_table_pairs_full_and_partial_of_one_state(tmp_path):
    full, part = SMALL_FQT_TRAINED[0], SMALL_FQT_TRAINED[1]
    rows = [_row(full, "cortex-m4", "dsp", 12e6, 3e6, 3e6, (1_000_000, 1_100_000)),
            _row(part, "cortex-m4", "dsp", 6e6, 3e6, 1e6, (100_000, 110_000))]
    (t,) = partial_table(rows)
    assert t["precision"] == "int8" and t["core"] == "m4 dsp"
    assert t["step speedup"] == 2.0 and t["backward speedup"] == 3.0 and t["MACs ratio"] == 10.0
    text = markdown(rows)
    assert "Dynamic partial updates on the device" in text and "`mt_fqt_upd_s8`" in text

    results, docs = tmp_path / "results", tmp_path / "docs"
    old = _row(full, "cortex-m0plus", "ref", 1e8, 3e7, 3e7, (1, 1))
    bench.write_results(results, "mcu", [old, {**rows[0], "instructions_per_step": 1.0}], complete=True)
    merge_into_mcu(results, docs, rows)
    got = json.loads((results / "mcu.json").read_text())
    assert [(r["setting"], r["core"]) for r in got["rows"]] == [
        (full.setting, "cortex-m0plus"), (full.setting, "cortex-m4"), (part.setting, "cortex-m4")]
    assert got["rows"][1]["instructions_per_step"] == 12e6 and got["complete"] is True
    assert "<!-- bench:mcu -->" in (docs / "benchmarks.md").read_text()


@pytest.mark.slow
def test_a_trained_state_row_is_measured_with_its_phases(arm_tools, tmp_path):
    """`mcu-partial --quick`: one trained-state partial step (20 warm-up steps) on the M4, bit-exact,
    its instructions split by phase from the runtime's symbols (read while the library exists)."""
    from mcutrain.cli import main
    assert main(["bench", "mcu-partial", "--quick", "--work", str(tmp_path / "w"), "--results",
                 str(tmp_path / "r"), "--docs", str(tmp_path / "d")]) == 0
    (row,) = json.loads((tmp_path / "r" / "mcu-partial.quick.json").read_text())["rows"]
    assert row["bit_exact"] is True and row["warmup_steps"] == 20
    phases = row["instructions_by_phase"]
    assert phases["forward"] > 0 and phases["backward"] > 0
    assert sum(phases.values()) == pytest.approx(row["instructions_per_step"])
