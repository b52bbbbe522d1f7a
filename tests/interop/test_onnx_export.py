"""to_onnx: float round trips are exact, the QDQ model has the int8 conventions, onnxruntime agrees."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import numpy_helper  # noqa: E402

from mcutrain import graph as G  # noqa: E402
from mcutrain import graph_passes as P  # noqa: E402
from mcutrain import zoo  # noqa: E402
from mcutrain.data import load_dataset  # noqa: E402
from mcutrain.engines import float_engine as fe  # noqa: E402
from mcutrain.engines import int_engine, ptq  # noqa: E402
from mcutrain.interop import InteropError, from_onnx, save_onnx, to_onnx  # noqa: E402
from mcutrain.methods.float import train  # noqa: E402


def ort_run(m, x_nhwc: np.ndarray, optimize: bool = True) -> np.ndarray:
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    y = sess.run(None, {"input": np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))})[0]
    return y.reshape(len(x_nhwc), -1)


def batch(shape, n: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((n, *shape), dtype=np.float32)


ARCHS = [("digits-cnn", None), ("small-cnn", None), ("mnist1d-cnn", None), ("mcunet-5fps", (32, 32, 3))]


@pytest.mark.parametrize("arch, shape", ARCHS)
def test_float_round_trip_is_exact_and_onnxruntime_agrees(arch, shape):
    g = zoo.build(arch, input_shape=shape, seed=2)
    m = to_onnx(g)
    back = from_onnx(m)
    assert back.input_shape == g.input_shape
    assert [(n.name, n.op, n.inputs, n.attrs) for n in back.nodes] == \
        [(n.name, n.op, n.inputs, n.attrs) for n in g.nodes]
    for a, b in zip(back.nodes, g.nodes):
        for k in b.params:
            np.testing.assert_array_equal(a.params[k], b.params[k])
    x = batch(g.input_shape)
    ref = fe.forward(g, x)
    assert np.abs(ort_run(m, x) - ref).max() <= 1e-5 * np.abs(ref).max()


def test_flatten_read_by_a_non_linear_goes_through_a_transpose():
    g = G.Graph((4, 4, 2), [
        G.conv2d("conv", G.INPUT, 3, 3, padding=1, in_channels=2),
        G.flatten("flat", "conv"), G.relu("r", "flat"),
        G.linear("fc", "r", 5, in_features=48)])
    zoo.he_init(g, 1)
    m = to_onnx(g)
    assert "Transpose" in [n.op_type for n in m.graph.node]
    x = batch((4, 4, 2)) - 0.5
    assert np.abs(ort_run(m, x) - fe.forward(g, x)).max() < 1e-5
    back = from_onnx(m)
    assert [n.op for n in back.nodes] == [n.op for n in g.nodes]
    np.testing.assert_array_equal(back.node("fc").params["weight"], g.node("fc").params["weight"])


def test_batchnorm_is_folded_on_export():
    g = G.Graph((4, 4, 1), [G.conv2d("conv", G.INPUT, 2, 1, in_channels=1),
                            G.batchnorm("bn", "conv", [2, 1], [0.5, 0], [0.1, 0.2], [1, 4]),
                            G.global_avgpool("gap", "bn")])
    zoo.he_init(g, 0)
    m = to_onnx(g)
    assert [n.op_type for n in m.graph.node] == ["Conv", "GlobalAveragePool"]
    x = batch((4, 4, 1))
    assert np.abs(ort_run(m, x) - fe.forward(P.fold_batchnorm(g), x)).max() < 1e-6


def test_qdq_model_carries_the_int8_conventions(tmp_path):
    g = zoo.build("small-cnn", seed=0)
    x = batch(g.input_shape, 16)
    qm = ptq.quantize_model(g, x)
    p = save_onnx(qm, tmp_path / "m.onnx")
    m = onnx.load(str(p))
    onnx.checker.check_model(m)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    dq = {n.output[0]: n for n in m.graph.node if n.op_type == "DequantizeLinear"}
    # conv weights: int8 OIHW, per-channel scales on axis 0, zero points 0
    w = inits["conv1.weight_q"]
    assert w.dtype == np.int8 and np.array_equal(w, qm.weights["conv1"].transpose(0, 3, 1, 2))
    assert dq["conv1.weight"].attribute[0].name == "axis" and dq["conv1.weight"].attribute[0].i == 0
    np.testing.assert_array_equal(inits["conv1.weight_scale"], qm.weight_qparams["conv1"].scale)
    assert not inits["conv1.weight_zero_point"].any()
    # int32 bias at scale s_x * s_w
    assert inits["fc1.bias_q"].dtype == np.int32 and np.array_equal(inits["fc1.bias_q"], qm.biases["fc1"])
    np.testing.assert_array_equal(inits["fc1.bias_scale"],
                                  qm.scale("flatten") * qm.weight_qparams["fc1"].scale)
    # the first linear's int8 columns in C, H, W order, matching ONNX's Flatten
    h, wd, c = g.shape("pool2")
    expect = qm.weights["fc1"].reshape(64, h, wd, c).transpose(0, 3, 1, 2).reshape(64, -1)
    assert np.array_equal(inits["fc1.weight_q"], expect)
    # every activation quantized with its own qparams
    assert inits["conv2.scale"] == qm.scale("conv2") and inits["conv2.zero_point"] == qm.zero_point("conv2")
    assert inits["conv2.zero_point"].dtype == np.int8
    assert m.graph.output[0].name == "logits"


def test_mcunet_qdq_runs_and_matches_int8_logits():
    g = zoo.build("mcunet-5fps", input_shape=(32, 32, 3), seed=4)
    x = batch(g.input_shape, 16, seed=1)
    qm = ptq.quantize_model(g, x)
    ql = int_engine.forward(qm, int_engine.quantize_input(qm, x)).astype(np.int64)
    out = g.output
    q = np.round(ort_run(to_onnx(qm), x) / qm.scale(out)).astype(np.int64) + qm.zero_point(out)
    # NOTE: rounding ties break differently (half to even vs half away) in a few elements per
    # million per layer; 40 layers of untrained weights amplify some into several steps.
    assert (q.argmax(1) == ql.argmax(1)).mean() >= 15 / 16
    assert np.mean(q == ql) >= 0.9


def test_onnxruntime_agrees_with_int8_predictions_of_trained_digits_cnn():
    d = load_dataset("digits")
    g = zoo.build("digits-cnn", seed=0)
    train(g, d.x_train, d.y_train, epochs=2, batch=64, lr=3e-3, seed=0, progress=False)
    qm = ptq.quantize_model(g, d.x_train)
    ql = int_engine.forward(qm, int_engine.quantize_input(qm, d.x_test)).astype(np.int64)
    pred = ql.argmax(1)
    assert (pred == d.y_test).mean() > 0.85
    out = g.output
    for optimize in (True, False):  # fused integer kernels / float QDQ simulation
        q = np.round(ort_run(to_onnx(qm), d.x_test, optimize) / qm.scale(out)).astype(np.int64)
        q += qm.zero_point(out)
        assert (q.argmax(1) == pred).mean() >= 0.99
        assert np.mean(q == ql) >= 0.95


def test_export_refuses_what_is_not_a_model():
    with pytest.raises(InteropError, match="needs a Graph or a QuantModel, got str"):
        to_onnx("model.npz")
