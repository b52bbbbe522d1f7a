"""Benchmark `mcu-inference` (`mcutrain.bench.mcu_inference`, once `benchmarks/mcu_inference.py`):
the quick run counts one bit-exact inference in QEMU and writes the keys README.md and c-api.md
quote; the page renders from rows. Needs the ARM cross toolchain and QEMU for the run."""

from __future__ import annotations

import json

import pytest

from mcutrain import bench
from mcutrain.bench.mcu_inference import layer_table, table


def test_quick_mcu_inference(arm_tools, riscv_tools, tmp_path):
    bench.run("mcu-inference", quick=True, work=tmp_path / "w", results=tmp_path / "r", docs=tmp_path / "d",
              log=lambda s: None)
    doc = json.loads((tmp_path / "r" / "mcu-inference.quick.json").read_text())
    assert list(doc) == ["benchmark", "rows", "layers", "meta"] and doc["layers"] == []
    m4, m33, m55, m4_ref, rv, m0 = doc["rows"]
    assert (m4["arch"], m4["core"], m4["kernels"], m4["bit_exact"]) == ("digits-cnn", "cortex-m4", "dsp",
                                                                       True)
    assert (m33["arch"], m33["core"], m33["kernels"], m33["bit_exact"]) == ("digits-cnn", "cortex-m33", "dsp",
                                                                           True)
    assert (m55["core"], m55["kernels"], m55["bit_exact"]) == ("cortex-m55", "dsp", True)
    assert m55["instructions"] < m4["instructions"]         # the Helium twins, measured side by side
    assert (rv["core"], rv["kernels"], rv["bit_exact"], m4_ref["kernels"]) == ("rv32imc", "ref", True, "ref")
    # the RISC-V row against the M4's portable C of the same run: within the issue's 1.3x
    assert rv["vs_m4_ref"] == pytest.approx(rv["instructions"] / m4_ref["instructions"], abs=1e-3)
    assert rv["vs_m4_ref"] <= 1.3 and "vs_m4_ref" not in m4_ref
    # the M0+ row runs the ARMv6-M twins, within the 6 instructions per MAC
    assert (m0["core"], m0["kernels"], m0["bit_exact"]) == ("cortex-m0plus", "ref", True)
    assert "mt_m0_dot4_run" in m0["top_functions"] and m0["instructions_per_mac"] <= 6
    for row in (m4, m33, m55):
        assert row["instructions_per_mac"] == pytest.approx(row["instructions"] / row["macs"], abs=1e-3)
        assert row["est_cycles"] > 0 and row["flash_bytes"] > row["const_bytes"] > 0
    assert not (tmp_path / "d").exists()                 # quick runs never touch the docs


def test_page_names_the_command_that_regenerates_it():
    row = {"arch": "small-cnn", "core": "cortex-m4", "kernels": "dsp", "macs": 1000, "instructions": 950.0,
           "instructions_per_mac": 0.95, "est_cycles_per_mac": 1.2, "est_ms": 0.02, "clock_mhz": 64.0,
           "arena_bytes": 10, "flash_bytes": 20, "bit_exact": True, "top_functions": {"mt_conv": 900}}
    text = table([row])
    assert "`mcutrain bench mcu-inference`" in text
    assert "| small-cnn | cortex-m4 | dsp | 1,000 | 950 |" in text
    layer = {"arch": "small-cnn", "target": "cortex-m4", "kernels": "dsp", "layer": "fc", "macs": 0,
             "instructions": 5, "instructions_per_mac": None, "bit_exact": False}
    assert "| small-cnn | cortex-m4 dsp | fc | 0 | 5 | - | NO |" in layer_table([layer])
