"""The `tflm` benchmark's quick run: TFLM's interpreter and mcutrain (golden engine and generated C,
host and QEMU) agree bit for bit in `tflite` rounding, and a model trained in the simulator scores
the same under TFLM. Issue #17 item 7 end to end (its fast variant): a `.tflite` trained with fqt
int8 (last layers and all), zo and bp-qas through the commands -- planned on the boards, run in
QEMU bit-exactly, exported back by `export --format tflite` and by `state-to-model` from the
device's state -- scores exactly the same by `mcutrain eval` and by TFLM, every logit identical.
Needs the ARM cross toolchain and QEMU (the C rows and the `run` step), hence `arm_tools`."""

from __future__ import annotations

import json

import pytest

from mcutrain.cli import main

pytest.importorskip("tflite_micro.python.tflite_micro.runtime", reason="pip install tflite-micro (dev extra)")


@pytest.mark.slow
def test_quick_tflm_benchmark(arm_tools, tmp_path):
    assert main(["bench", "tflm", "--quick", "--results", str(tmp_path), "--docs", str(tmp_path),
                 "--work", str(tmp_path / "work")]) == 0
    doc = json.loads((tmp_path / "tflm.quick.json").read_text())
    assert doc["complete"] and {r["model"] for r in doc["rows"]} == {"digits-cnn", "mobilenet-v1-0.25",
                                                                      "imu-cnn1d"}
    for r in doc["rows"]:
        assert r["tflite_logits_equal"] == 1.0 and r["tflite_max_diff"] == 0, r
        assert r["single_logits_equal"] < 1.0, r        # the modes really differ: measured, not assumed
    (imu,) = (r for r in doc["rows"] if r["source"] == "pytorch")
    layers = doc["layers"]
    assert imu["round_trip_identical"] and imu["layers_compared"] == len(layers) > 0
    assert {r["model"] for r in layers} == {"imu-cnn1d"}
    for r in layers:
        assert r["tflite_chained_equal"] == r["tflite_isolated_equal"] == 1.0, r
        assert r["tflite_chained_max_diff"] == 0 and r["single_isolated_max_diff"] <= 1, r
    assert imu["tflite_chained_layers_min_equal"] == 1.0 and imu["single_isolated_layers_min_equal"] < 1.0
    trip = doc["trained_round_trip"]
    assert trip["rounding"] == "tflite"
    assert trip["accuracy_after_mcutrain"] == trip["accuracy_after_tflm"]
    assert trip["accuracy_after_mcutrain"] > trip["accuracy_before"]     # it learned something
    # the generated C: every quick model on the host (reference and DSP loops), the IMU net on each
    # board under QEMU, all bit-identical with TFLM, instructions counted
    rows = doc["c_library"]
    models = {r["model"] for r in doc["rows"]}
    assert {(r["model"], r["kernels"]) for r in rows if r["target"] == "host"} == \
        {(m, k) for m in models for k in ("ref", "dsp")}
    boards = [r for r in rows if r["target"] != "host"]
    assert {(r["model"], r["core"], r["kernels"]) for r in boards} == {
        ("imu-cnn1d", "cortex-m0plus", "ref"), ("imu-cnn1d", "cortex-m4", "dsp"),
        ("imu-cnn1d", "cortex-m7", "dsp")}
    for r in rows:
        assert r["logits_equal"] == r["samples_equal"] == 1.0 and r["max_diff"] == 0, r
        assert r["inputs"] == (20 if r["target"] == "host" else 4), r
    for r in boards:   # a dual 16-bit multiply-accumulate (SMLAD) is the most any instruction does
        assert r["instructions_per_inference"] > r["macs"] / 2 and r["does_not_fit"] == [], r
    rows = {r["method"]: r for r in trip["methods"]}
    assert set(rows) == {"fqt-int8-last", "fqt-int8-all", "zo", "bp-qas"}
    for r in rows.values():
        assert r["accuracy_before"] == trip["accuracy_before"], r     # every method starts from the file
        assert r["nrf52840_fits"] and r["stm32f746_fits"] and r["run_bit_exact"], r
        for kind in ("exported", "device"):
            assert r[f"{kind}_rounding"] == "tflite", r
            assert r[f"{kind}_accuracy_eval"] == r[f"{kind}_accuracy_tflm"], r
            assert r[f"{kind}_logits_identical"], r
        assert r["exported_accuracy_eval"] == r["accuracy_after"], r    # train -o wrote what it measured
        assert r["accuracy_after"] != r["accuracy_before"], r           # it trained
