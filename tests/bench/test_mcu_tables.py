"""The docs block and target checks of benchmark `mcu` (`mcutrain.bench.mcu_tables`), on rows
written by hand (pure Python)."""

from __future__ import annotations

import pytest

from mcutrain.bench.mcu import pending_row
from mcutrain.bench.mcu_cases import SMALL_FQT
from mcutrain.bench.mcu_tables import checks, markdown


def test_markdown_names_pending_cases():
    done = {"model": "small-cnn", "setting": "zo", "options": "--method zo", "core": "cortex-m4",
            "kernels": "dsp", "batch": 1, "macs_per_step": 10, "instructions_per_step": 30.0,
            "instructions_per_sample": 30.0, "instructions_per_mac": 3.0, "est_ms_per_sample": 1.0,
            "clock_mhz": 64.0, "seed_ms": 897.6, "planned_ram": 1050, "linked_ram": 1000,
            "ram_diff_pct": 5.0, "planned_flash": 2048, "linked_flash": 2048, "flash_diff_pct": 0.0,
            "fits_board": True, "bit_exact": True, "input_shape": [28, 28, 1]}
    ref = {**done, "kernels": "ref", "instructions_per_step": 60.0}
    pend = pending_row(SMALL_FQT[0], "cortex-m4", "dsp", "not implemented yet for C")
    text = markdown([ref, done, pend])
    assert "| 2.00 |" in text   # ref/dsp = 60 / 30
    assert "Pending" in text and "fqt uint8, all 4 layers" in text
    assert "worst 5.0% (met)" in text and "pending (FQT in C)" in text


def _fqt_row(batch: int, per_mac: float, **extra) -> dict:
    setting = "fqt int8, all 4 layers" + (f", batch {batch}" if batch > 1 else "")
    return {"model": "small-cnn", "setting": setting,
            "options": "--method fqt --precision int8 --trainable all", "core": "cortex-m4", "kernels": "dsp",
            "batch": batch, "macs_per_step": 1000 * batch, "instructions_per_mac": per_mac, "bit_exact": True,
            "ram_diff_pct": 1.0, **extra}


def test_instruction_target_is_checked_per_batch_and_met_at_the_largest():
    rows = [_fqt_row(1, 2.7, top_functions={"mt_fqt_upd_s8": 1500.0}), _fqt_row(8, 1.3), _fqt_row(32, 1.1),
            {**_fqt_row(1, 0.9), "setting": "fqt int8, all 4 layers, partial 0.1",
             "options": "--method fqt --precision int8 --trainable all --partial 0.1"}]
    c = checks(rows)
    # the partial row is left out
    assert c["m4_dsp_fqt_int8_instr_per_mac_by_batch"] == {"1": 2.7, "8": 1.3, "32": 1.1}
    assert c["m4_dsp_fqt_int8_instr_per_mac"] == 2.7
    assert c["m4_dsp_fqt_int8_target_met"] is True and c["m4_dsp_fqt_int8_target_met_at_batch"] == [8, 32]
    assert c["m4_dsp_fqt_int8_update_per_mac"] == 1.5
    assert checks(rows[:1])["m4_dsp_fqt_int8_target_met"] is False


def test_riscv_is_compared_with_the_m4_portable_c_of_the_same_setting():
    m4 = {**_fqt_row(1, 20.0), "kernels": "ref", "instructions_per_step": 1000.0}
    rv = {**m4, "core": "rv32imc", "instructions_per_step": 1100.0}
    slow = {**rv, "setting": "zo", "instructions_per_step": 2000.0}
    c = checks([m4, rv, slow, {**m4, "kernels": "dsp", "instructions_per_step": 500.0}])
    assert c["rv32imc_vs_m4_ref"] == {"small-cnn: fqt int8, all 4 layers": pytest.approx(1.1)}  # no M4 zo row
    assert c["rv32imc_target_met"] is True
    assert checks([m4, {**rv, "instructions_per_step": 1400.0}])["rv32imc_target_met"] is False
    assert checks([m4])["rv32imc_target_met"] is None
    soft = {**m4, "setting": "fqt float32, all 4 layers"}        # soft float on rv32imc: shown, no target
    c = checks([m4, rv, soft, {**soft, "core": "rv32imc", "instructions_per_step": 9000.0}])
    assert c["rv32imc_vs_m4_ref"]["small-cnn: fqt float32, all 4 layers"] == pytest.approx(9.0)
    assert c["rv32imc_target_met"] is True


def test_first_and_steady_steps_stand_side_by_side():
    row = {**_fqt_row(8, 1.28, first_step_instructions=29280.0), "instructions_per_step": 10240.0,
           "instructions_per_sample": 1280.0, "est_ms_per_sample": 1.0, "clock_mhz": 64.0, "seed_ms": None,
           "planned_ram": 1000, "linked_ram": 1000, "planned_flash": 1000, "linked_flash": 1000,
           "flash_diff_pct": 0.0, "fits_board": True, "input_shape": [28, 28, 1]}
    text = markdown([row])
    assert "first step instr/MAC" in text
    assert "| 1.28 | 3.66 |" in text      # steady 1.28, first 29280 / 8000 MACs
