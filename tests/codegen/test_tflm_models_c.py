"""The generated C of the three PyTorch-built TFLM models (`bench.tflm_models`) gives exactly TFLite
Micro's int8 logits: on the host (reference and DSP loops, sanitizers on) and under QEMU on a board of
each core, fed the same inputs as TFLM's interpreter. (The zoo architectures: test_rounding_tflite_tflm.)
A model that does not link for a board is built for the next bigger one, and says so."""

from __future__ import annotations

import functools

import numpy as np
import pytest

pytest.importorskip("torch", reason="the PyTorch-built models need torch (the dev extra)")
pytest.importorskip("tflite_micro.python.tflite_micro.runtime",
                    reason="pip install tflite-micro (the dev extra has it)")

from conftest import needs_gcc
from mcutrain.bench import tflm_c, tflm_models
from mcutrain.bench.tflm_c import Reference, board_row, qemu_inputs
from mcutrain.bench.tflm_layers import tflm_outputs
from mcutrain.codegen.library import export_library
from mcutrain.interop.tflite_import import from_tflite_bytes
from mcutrain.mcu.hostbuild import build_host
from mcutrain.mcu.hostrun import run_host
from mcutrain.targets import Target, get_target

INPUTS = 8


@functools.cache
def reference(name: str) -> Reference:
    """The model as imported from its `.tflite`, INPUTS random int8 inputs and TFLM's logits on them."""
    m = tflm_models.build(name)
    qm, _ = from_tflite_bytes(m.tflite)
    assert qm.rounding == "tflite"
    x_q = np.random.default_rng(3).integers(-128, 128, (INPUTS, *qm.graph.input_shape)).astype(np.int8)
    return Reference(name, qm, x_q, tflm_outputs(m.tflite, x_q).reshape(INPUTS, -1))


@needs_gcc
@pytest.mark.parametrize("kernels", ["ref", "dsp"])
@pytest.mark.parametrize("name", sorted(tflm_models.RECIPES))
def test_generated_c_equals_tflm_on_the_host(tmp_path, name, kernels):
    ref = reference(name)
    export_library(ref.qm, tmp_path / "lib", kernels=kernels)
    exe = build_host(tmp_path / "lib", tmp_path / "harness", kernels=kernels)
    logits, _ = run_host(exe, ref.x_q, ref.qm.graph.num_classes)
    np.testing.assert_array_equal(logits, ref.logits)


@pytest.mark.parametrize(("board", "kernels"), tflm_c.BOARD_RUNS)
def test_generated_c_equals_tflm_on_each_core(arm_tools, board, kernels):
    row = board_row(reference("imu-cnn1d"), board, kernels, 2)
    assert (row["target"], row["does_not_fit"], row["inputs"]) == (board, [], 2)
    assert row["logits_equal"] == 1.0 and row["max_diff"] == 0, row


def test_a_model_too_big_for_a_board_goes_to_the_next_bigger(arm_tools, monkeypatch):
    tiny = Target("tiny-m0plus", "cortex-m0plus", 48_000_000, 4096, 65536, False, False, "mps2-an385")
    monkeypatch.setattr(tflm_c, "get_target", lambda name: tiny if name == tiny.name else get_target(name))
    monkeypatch.setitem(tflm_c.BIGGER, tiny.name, "cortex-m0plus")
    row = board_row(reference("imu-cnn1d"), tiny.name, "ref", 1)
    assert (row["target"], row["does_not_fit"]) == ("cortex-m0plus", [tiny.name])
    assert row["logits_equal"] == 1.0, row


def test_qemu_inputs_give_each_run_the_same_work_within_bounds():
    assert qemu_inputs(7_000_000, 1000) == tflm_c.QEMU_MAC_BUDGET // 7_000_000
    assert qemu_inputs(1_000, 1000) == tflm_c.QEMU_MAX_INPUTS
    assert qemu_inputs(10**9, 1000) == tflm_c.QEMU_MIN_INPUTS
    assert qemu_inputs(1_000, 50) == 50
