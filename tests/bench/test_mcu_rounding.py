"""Benchmark `mcu-rounding` (`mcutrain.bench.mcu_rounding`): the quick run counts digits-cnn's
inference on the M4 (DSP kernels) in both rounding modes, both bit-exact, with the tflite / single
ratio of the two counts, and leaves the docs alone. Needs the ARM cross toolchain and QEMU."""

from __future__ import annotations

import json

import pytest

from mcutrain import bench


def test_quick_mcu_rounding(arm_tools, tmp_path):
    bench.run("mcu-rounding", quick=True, work=tmp_path / "w", results=tmp_path / "r", docs=tmp_path / "d",
              log=lambda s: None)
    doc = json.loads((tmp_path / "r" / "mcu-rounding.quick.json").read_text())
    (row,) = doc["rows"]
    assert [row[k] for k in ("kind", "model", "core", "kernels")] == ["inference", "digits-cnn", "cortex-m4",
                                                                       "dsp"]
    assert row["single_bit_exact"] and row["tflite_bit_exact"]
    assert row["single_instructions"] != row["tflite_instructions"]     # two libraries were measured
    assert row["tflite_over_single"] == pytest.approx(row["tflite_instructions"] / row["single_instructions"])
    assert not (tmp_path / "d").exists()


def test_an_fqt_step_in_tflite_rounding_costs_what_single_costs_on_the_m4(arm_tools):
    """digits-cnn's fqt int8 step (its DSP conv paths in the row's mode), both modes bit-exact with the
    simulator, tflite within 5% of single (issue #17's target)."""
    from mcutrain.bench.mcu_rounding import Settings, measure_all

    st = Settings(inference=(), training=("fqt",), runs=(("cortex-m4", "dsp"),))
    (row,) = measure_all(st, lambda s: None)
    assert row["single_bit_exact"] and row["tflite_bit_exact"]
    assert row["single_instructions"] != row["tflite_instructions"]     # two libraries were measured
    assert abs(row["tflite_over_single"] - 1) < 0.05, row
