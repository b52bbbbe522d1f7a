"""Post-training quantization: calibration ranges, qparams sharing, BatchNorm folding, accuracy."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits

from mcutrain import graph as G
from mcutrain import graph_passes as P
from mcutrain import zoo
from mcutrain.engines import float_engine, ptq
from mcutrain.engines import int_engine as E
from mcutrain.methods.float import evaluate, train
from mcutrain.quant.qparams import qparams_from_range


def test_minmax_ranges_are_the_float_extremes():
    g = zoo.build("small-cnn", seed=0)
    x = np.random.default_rng(0).standard_normal((10, 28, 28, 1)).astype(np.float32)
    ranges = ptq.calibrate(g, x, batch_size=3)  # chunks of 3, 3, 3, 1 must give the global extremes
    # NOTE: BLAS blocking depends on the batch size, so the expected values use the same chunks
    chunks = [float_engine.run(g, x[i:i + 3], save=False) for i in range(0, 10, 3)]
    assert ptq.calibrated_tensors(g) == ["input", "conv1", "conv2", "fc1", "fc2"]
    for t, (lo, hi) in ranges.items():
        assert lo == min(float(a[t].min()) for a in chunks), t
        assert hi == max(float(a[t].max()) for a in chunks), t
    assert ranges["conv1"][0] == 0.0  # relu is fused: the range is of the activated tensor


def test_percentile_ignores_an_outlier():
    rng = np.random.default_rng(1)
    x = rng.random((64, 8, 8, 1), dtype=np.float32)
    x[5, 3, 3, 0] = 1000.0
    g = zoo.build("digits-cnn", seed=1)
    mm = ptq.calibrate(g, x)["input"]
    pc = ptq.calibrate(g, x, method="percentile", percentile=99.9)["input"]
    assert mm[1] == 1000.0
    assert 0.9 < pc[1] < 1.0
    assert ptq.calibrate(g, x, method="percentile", percentile=100.0) == ptq.calibrate(g, x)


def test_qparams_assignment():
    g = zoo.build("small-cnn", seed=2)
    x = np.random.default_rng(2).random((16, 28, 28, 1), dtype=np.float32)
    qm = ptq.quantize_model(g, x)
    ranges = ptq.calibrate(qm.graph, x)
    for t, (lo, hi) in ranges.items():
        assert qm.act_qparams[t] == qparams_from_range(lo, hi), t
    assert qm.act_qparams["pool1"] is qm.act_qparams["conv1"]
    assert qm.act_qparams["flatten"] is qm.act_qparams["pool2"] is qm.act_qparams["conv2"]
    assert int(qm.act_qparams["conv1"].zero_point) == -128  # relu output: range [0, hi]
    for n in qm.graph.parametric():
        w, qp = n.params["weight"], qm.weight_qparams[n.name]
        assert np.array_equal(qp.scale, np.abs(w.reshape(len(w), -1)).max(axis=1) / np.float32(127))
        assert np.abs(qm.weights[n.name].reshape(len(w), -1)).max(axis=1).tolist() == [127] * len(w)
        want_b = np.round(n.params["bias"].astype(np.float64)
                          / (np.float64(qm.act_qparams[n.inputs[0]].scale) * qp.scale.astype(np.float64)))
        assert np.array_equal(qm.biases[n.name], want_b.astype(np.int32))


def test_dequantized_logits_track_float():
    g = zoo.build("digits-cnn", seed=3)
    rng = np.random.default_rng(3)
    g.node("fc").params["bias"] = rng.standard_normal(10).astype(np.float32)
    x = rng.random((64, 8, 8, 1), dtype=np.float32)
    qm = ptq.quantize_model(g, x)
    out = qm.act_qparams["fc"]
    deq = out.dequantize(E.forward(qm, E.quantize_input(qm, x)))
    err = np.abs(deq - float_engine.forward(g, x))
    assert err.max() < 4 * float(out.scale)  # a few output steps of accumulated rounding


def test_batchnorm_is_folded_before_quantizing():
    rng = np.random.default_rng(4)
    nodes = [G.conv2d("conv", G.INPUT, 4, 3, padding=1, in_channels=2),
             G.batchnorm("bn", "conv", *(rng.random(4) + 0.5 for _ in range(2)),
                         rng.standard_normal(4), rng.random(4) + 0.5),
             G.relu("act", "bn"), G.flatten("flat", "act"),
             G.linear("fc", "flat", 3, in_features=4 * 4 * 4)]
    g = zoo.he_init(G.Graph((4, 4, 2), nodes), seed=4)
    x = rng.standard_normal((32, 4, 4, 2)).astype(np.float32)
    qm = ptq.quantize_model(g, x)
    assert [n.name for n in qm.graph.nodes] == ["conv", "flat", "fc"]
    assert qm.graph.node("conv").act == "relu"
    folded = P.fuse_activations(P.fold_batchnorm(g))
    deq = qm.act_qparams["fc"].dequantize(E.forward(qm, E.quantize_input(qm, x)))
    assert np.abs(deq - float_engine.forward(folded, x)).max() < 4 * float(qm.act_qparams["fc"].scale)


def test_bias_is_clipped_to_accumulator_headroom():
    g = G.Graph((4,), [G.linear("fc", G.INPUT, 2, in_features=4,
                                weight=np.array([[1, -1, 1, 1], [0.5, 0, 0, 0]], np.float32),
                                bias=np.array([1e9, -0.25], np.float32))])
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    qm = ptq.quantize_model(g, x)
    room = 2**31 - 1 - E.x_magnitude(qm.zero_point("input")) * 4 * 127
    assert qm.biases["fc"][0] == room
    assert qm.biases["fc"][1] == round(-0.25 / (float(qm.scale("input")) * 0.5 / 127))
    E.forward(qm, E.quantize_input(qm, x))  # the engine accepts it (no AccumulatorOverflow)


def test_bad_calibration_input_is_refused():
    g = zoo.build("digits-cnn")
    x = np.zeros((4, 8, 8, 1), np.float32)
    with pytest.raises(ValueError, match="calibration method"):
        ptq.quantize_model(g, x, method="kl")
    with pytest.raises(ValueError, match=r"\(N, 8, 8, 1\)"):
        ptq.quantize_model(g, np.zeros((4, 8, 8), np.float32))
    with pytest.raises(ValueError, match="NaN"):
        ptq.quantize_model(g, x + np.nan)
    with pytest.raises(ValueError, match="at least one sample"):
        ptq.quantize_model(g, x[:0])


def test_trained_digits_int8_accuracy_within_a_point_of_float():
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[..., None]
    y = d.target
    perm = np.random.default_rng(0).permutation(len(x))
    tr, te = perm[:1300], perm[1300:]
    g = zoo.build("digits-cnn", seed=0)
    train(g, x[tr], y[tr], epochs=2, batch=32, lr=3e-3, seed=0, progress=False)
    float_acc = evaluate(g, x[te], y[te])
    qm = ptq.quantize_model(g, x[tr[:256]])
    int_acc = float(np.mean(E.predict(qm, x[te]) == y[te]))
    assert float_acc > 0.9
    assert abs(int_acc - float_acc) <= 0.01
