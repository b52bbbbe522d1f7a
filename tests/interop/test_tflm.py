"""mcutrain's int8 engine against TensorFlow Lite Micro's interpreter (its reference kernels),
on 1,000 random int8 inputs per model: the .tflite that `to_tflite` writes, run by TFLM, and
the same file imported back, run by the golden engine.

In the `tflite` rounding mode (TFLite's double rounding, from the rounding branch) the logits
must be bit-identical. In today's `single` rounding they differ by a rounding step where a
requantization lands near a tie, and the differences compound with depth; the fraction of
bit-identical logits is reported (pytest -s prints it) and the predictions must agree.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

pytest.importorskip("tflite", reason="pip install tflite (a dependency of mcutrain)")
pytest.importorskip("tflite_micro.python.tflite_micro.runtime",
                    reason="pip install tflite-micro (the dev extra has it)")

from tflite_models import MODELS, quant_model

from mcutrain.bench import tflm_models
from mcutrain.bench.tflm_layers import agreement, compare_layers, tflm_run
from mcutrain.bench.tflm_layers import tflm_outputs as tflm_logits
from mcutrain.engines import int_engine
from mcutrain.interop.tflite_export import to_tflite, to_tflite_mapped
from mcutrain.interop.tflite_import import from_tflite_bytes
from mcutrain.qmodel import QuantModel

SAMPLES = 1000


@functools.cache
def case(name: str) -> tuple[QuantModel, np.ndarray, np.ndarray]:
    """(the model imported from its .tflite, SAMPLES random int8 inputs, TFLM's logits on them)."""
    data = to_tflite(quant_model(name))
    qm, _ = from_tflite_bytes(data)
    x = np.random.default_rng(7).integers(-128, 128, (SAMPLES, *qm.graph.input_shape)).astype(np.int8)
    return qm, x, tflm_logits(data, x)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_single_rounding_against_tflm(name):
    qm, x, ref = case(name)
    qm = dataclasses.replace(qm, rounding="single")   # a copy: case() is cached and shared
    single = agreement(int_engine.forward(qm, x), ref)
    print(f"\n{name}: single rounding vs TFLM: {single}")
    assert 0.0 < single["logits_equal"] < 1.0, single        # reported: measured, not assumed
    assert single["argmax_equal"] >= 0.95, single
    assert single["max_diff"] <= 16, single


@pytest.mark.parametrize("name", sorted(MODELS))
def test_tflite_rounding_is_bit_exact_with_tflm(name):
    qm, x, ref = case(name)
    assert qm.rounding == "tflite"                               # what the importer sets
    exact = agreement(int_engine.forward(qm, x), ref)
    print(f"\n{name}: tflite rounding vs TFLM: {exact}")
    assert exact["logits_equal"] == 1.0, exact


def test_a_tflite_rounding_model_of_our_own_exports_what_it_computes():
    """A model made here and switched to TFLite's rounding: its global average pool is written as
    TFLM's MEAN, so TFLM computes exactly what mcutrain simulates."""
    import dataclasses as dc

    from mcutrain.interop.tflite_export import to_tflite
    qm = dc.replace(quant_model("mobilenet-v1-0.25"), rounding="tflite")
    x = np.random.default_rng(3).integers(-128, 128, (200, *qm.graph.input_shape)).astype(np.int8)
    exact = agreement(int_engine.forward(qm, x), tflm_logits(to_tflite(qm), x))
    assert exact["logits_equal"] == 1.0, exact


USER_SAMPLES = {"person-detector": 60, "ds-cnn-kws": 150, "imu-cnn1d": 400}
"""Inputs per PyTorch-built model here, fewer than the benchmark's 1,000 each (`mcutrain bench tflm`)
to keep each test at a few seconds: TFLM's invoke with every tensor kept and the per-layer
comparison in two modes cost ~30 ms per sample on the 96x96 person detector."""


@pytest.mark.parametrize("name", sorted(USER_SAMPLES))
def test_pytorch_built_models_match_tflm_in_every_layer(name):
    """The models TFLM users deploy, built in PyTorch (bench/tflm_models), through from_torch, PTQ
    and .tflite: every layer's int8 output as TFLM's interpreter holds it equals mcutrain's, bit
    for bit, in the tflite rounding mode; in single rounding one layer alone differs by one step."""
    pytest.importorskip("torch", reason="the models are built in PyTorch (the dev extra)")

    m = tflm_models.build(name)
    qm, _ = from_tflite_bytes(m.tflite)
    data, tensors = to_tflite_mapped(qm)
    assert data == m.tflite                                   # the layers are read from this very file
    x = np.random.default_rng(7).integers(-128, 128, (USER_SAMPLES[name], *qm.graph.input_shape)
                                          ).astype(np.int8)
    ref, layers = compare_layers(qm, data, tensors, x)
    compared = {lay.name for lay in layers}
    assert {n.name for n in qm.graph.parametric()} <= compared      # every conv, depthwise and FC
    assert agreement(int_engine.forward(qm, x), ref)["logits_equal"] == 1.0
    for lay in layers:
        for way in ("chained", "isolated"):
            t = lay.tally(f"tflite_{way}")
            assert t.equal == t.total > 0, (lay.name, way, t)
        assert lay.tally("single_isolated").max_diff <= 1, lay
    assert any(lay.tally("single_isolated").equal < lay.tally("single_isolated").total for lay in layers)
    out, kept = tflm_run(data, x[:3], (tensors[qm.graph.output],))  # GetTensor reads what get_output does
    assert np.array_equal(kept[tensors[qm.graph.output]], out.reshape(3, -1))
