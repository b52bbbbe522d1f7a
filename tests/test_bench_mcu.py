"""Benchmark `mcu --quick`: training steps in QEMU, bit-exact, counted, planned vs linked.

Needs the ARM cross toolchain and QEMU; skips with the command that installs them otherwise.
"""

from __future__ import annotations

import json

import pytest

from mcutrain import bench, bench_mcu


@pytest.fixture(scope="module")
def quick_rows(arm_tools, tmp_path_factory):
    out = tmp_path_factory.mktemp("mcu")
    bench.run("mcu", quick=True, work=out / "work", results=out / "results", docs=out / "docs",
              log=lambda s: None)
    assert not (out / "docs" / "benchmarks.md").exists()   # --quick never touches the docs
    return json.loads((out / "results" / "mcu.quick.json").read_text())


def test_registered():
    assert "mcu" in bench.benchmarks()


def test_quick_rows_are_bit_exact_and_consistent(quick_rows):
    rows = quick_rows["rows"]
    assert quick_rows["complete"] is True
    assert [(r["core"], r["kernels"]) for r in rows] == [("cortex-m4", "dsp"), ("cortex-m0plus", "ref")]
    for r in rows:
        assert r["bit_exact"] is True, r["mismatch"]
        assert r["instructions_per_mac"] == pytest.approx(r["instructions_per_step"] / r["macs_per_step"])
        assert r["instructions_per_sample"] == r["instructions_per_step"] / r["batch"]
        # ms at the board clock: the estimated cycles over the board's clock
        ms = 1e3 * r["est_cycles_per_sample"] / (r["clock_mhz"] * 1e6)
        assert r["est_ms_per_sample"] == pytest.approx(ms)
        # the planner's arena is the arena the library links (up to 8-byte alignment)
        assert 0 <= r["linked_arena"] - r["planned_arena"] < 8
        # the library's linked RAM: its static part plus the stack it measured
        assert r["linked_ram"] == r["linked_static_ram"] + r["stack_used"] and 0 < r["stack_used"] < 8192
        # the image holds more than the library (the harness, newlib)
        assert r["image_ram"] > r["linked_ram"] and r["image_flash"] > r["linked_flash"]
    zo, fq = rows
    assert (zo["board"], zo["clock_mhz"], fq["board"], fq["clock_mhz"]) == ("nrf52840", 64.0, "rp2040", 133.0)
    # the ZO step with every layer trainable: planned RAM within 5% of the linked library + stack,
    # and the planner's static RAM (arena + trainable tensors + state) is the library's
    assert abs(zo["ram_diff_pct"]) < 5.0 and abs(zo["static_ram_diff_pct"]) < 0.1
    # FQT keeps per-layer requantization constants of frozen layers in RAM too: never less than planned
    assert fq["linked_static_ram"] >= fq["planned_static_ram"]
    # the DSP kernels stay within a few instructions per MAC; the M0+ reference loops do not
    assert 1.0 < zo["instructions_per_mac"] < 4.0 < fq["instructions_per_mac"]


def test_markdown_names_pending_cases():
    done = {"model": "small-cnn", "setting": "zo", "options": "--method zo", "core": "cortex-m4",
            "kernels": "dsp", "batch": 1, "macs_per_step": 10, "instructions_per_step": 30.0,
            "instructions_per_sample": 30.0, "instructions_per_mac": 3.0, "est_ms_per_sample": 1.0,
            "clock_mhz": 64.0, "seed_ms": 897.6, "planned_ram": 1050, "linked_ram": 1000,
            "ram_diff_pct": 5.0, "planned_flash": 2048, "linked_flash": 2048, "flash_diff_pct": 0.0,
            "fits_board": True, "bit_exact": True, "input_shape": [28, 28, 1]}
    ref = {**done, "kernels": "ref", "instructions_per_step": 60.0}
    pend = bench_mcu.pending_row(bench_mcu.SMALL_FQT[0], "cortex-m4", "dsp", "not implemented yet for C")
    text = bench_mcu.markdown([ref, done, pend])
    assert "| 2.00 |" in text   # ref/dsp = 60 / 30
    assert "Pending" in text and "fqt uint8, all 4 layers" in text
    assert "worst 5.0% (met)" in text and "pending (FQT in C)" in text


def test_pending_when_run_lacks_the_method():
    case = bench_mcu.Case("small-cnn", "x", ("--method", "nope"))
    with pytest.raises(bench_mcu.Pending, match="not implemented yet for C"):
        bench_mcu.method_args(case, "cortex-m4", "dsp")


def test_forward_proxy_scales_the_measured_forward_pass(arm_tools):
    case = bench_mcu.Case("digits-cnn", "zo mix, 4 queries", ("--method", "zo", "--queries", "4"))
    r = bench_mcu.forward_proxy(case, "cortex-m4", "dsp", log=lambda s: None)
    assert r["forward_bit_exact"] is True and r["estimated_from_forward"] is True
    assert r["forward_instructions_per_mac"] == r["forward_instructions"] / r["forward_macs"]
    # queries re-run the net, so the step has more MACs than one forward pass
    assert r["macs_per_step"] > r["forward_macs"]
    assert r["est_instructions_per_sample"] == pytest.approx(
        r["forward_instructions_per_mac"] * r["macs_per_step"] / r["batch"])


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
    c = bench_mcu.checks(rows)
    # the partial row is left out
    assert c["m4_dsp_fqt_int8_instr_per_mac_by_batch"] == {"1": 2.7, "8": 1.3, "32": 1.1}
    assert c["m4_dsp_fqt_int8_instr_per_mac"] == 2.7
    assert c["m4_dsp_fqt_int8_target_met"] is True and c["m4_dsp_fqt_int8_target_met_at_batch"] == [8, 32]
    assert c["m4_dsp_fqt_int8_update_per_mac"] == 1.5
    assert bench_mcu.checks(rows[:1])["m4_dsp_fqt_int8_target_met"] is False
