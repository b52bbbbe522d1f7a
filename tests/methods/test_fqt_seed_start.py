"""FQT's seed-faithful precisions start from an int8 model's integers (`methods/fqt_seed_start`):
the activation qparams are the file's shifted by 128 exactly, weights and biases are re-quantized
within half a step of the file's values, float32 takes the file's values, and no calibration pass
runs over the new data."""

from __future__ import annotations

import numpy as np
import pytest
from reference_fqt import tiny_graph
from test_fqt import _residual_graph

from mcutrain import zoo
from mcutrain.engines import ptq
from mcutrain.graph import INPUT
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_model import ema_reproducing
from mcutrain.methods.fqt_seed_start import uint8_activation
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.qmodel import QuantModel
from mcutrain.quant.qparams import QParams

GRAPHS = {"tiny": tiny_graph, "residual": _residual_graph,
          "digits-cnn": lambda s: zoo.build("digits-cnn", seed=s)}
SLACK = 1 + 2.0**-12
"""Half a step, widened by the float32 rounding of a dequantized value (a few ulp)."""


def _int8_model(graph: str) -> tuple[QuantModel, np.ndarray]:
    g = GRAPHS[graph](2)
    x = np.random.default_rng(0).random((32, *g.input_shape), dtype=np.float32)
    return ptq.quantize_model(g, x), x


def test_uint8_activation_ranges_give_the_files_levels():
    """Every int8 activation qparams a float32 range gives has a range giving its uint8 (s, z + 128)."""
    rng = np.random.default_rng(1)
    scales = np.float32(2.0) ** rng.uniform(-20, 6, 2000).astype(np.float32)
    exact = 0
    for s, z in zip(scales, rng.integers(-128, 128, 2000), strict=True):
        qp = QParams(np.float32(s), np.int32(z), "int8")
        ema, target, ok = uint8_activation(qp, 0.1)
        assert target == QParams(np.float32(s), np.int32(z + 128), "uint8")
        assert ok == (ema.qparams("uint8") == target)
        assert ok or not ema_reproducing(qp, 0.1)[1], (s, z)    # only where int8 has no range either
        exact += ok
    assert exact / 2000 >= 0.99, exact
    for z in (-128, 127):     # ranges with 0 at an end (after a relu: z = -128)
        assert uint8_activation(QParams(np.float32(0.0123), np.int32(z), "int8"), 0.1)[2]


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("prec", ["uint8", "mixed"])
def test_uint8_formats_take_the_files_levels_and_values(graph, prec):
    qm, x = _int8_model(graph)
    m = FQT(qm, FQTConfig(precision=prec), x[:8])
    assert not m.pinned
    for t in [INPUT, *(n.name for n in m.graph.nodes)]:     # activations: exact
        qp = qm.act_qparams[t]
        assert m.act_qparams(t) == QParams(qp.scale, qp.zero_point + 128, "uint8"), t
    for n in m.graph.parametric():
        name, o = n.name, m.w[n.name].shape[0]
        w_file = qm.weight_qparams[name].dequantize(qm.weights[name])
        qp = m.wqp[name]
        assert not qp.per_channel and qp.dtype == "uint8"
        reach = np.float32(127) * np.float32(np.max(qm.weight_qparams[name].scale))
        assert (m.w_ema[name].lo, m.w_ema[name].hi) == (-reach, reach)    # the file's range of the layer
        assert np.abs(qp.dequantize(m.w[name]) - w_file).max() <= 0.5 * float(qp.scale) * SLACK, name
        sx = np.float64(np.float32(qm.act_qparams[n.inputs[0]].scale))
        s_file = sx * np.broadcast_to(qm.weight_qparams[name].scale, (o,)).astype(np.float64)
        b_file = qm.biases[name].astype(np.float64) * s_file
        step = sx * np.float64(qp.scale)
        assert np.abs(m.b[name].astype(np.float64) * step - b_file).max() <= 0.5 * step * SLACK, name
        np.testing.assert_array_equal(m.b_acc_scale[name], np.float32(sx) * qp.scale)


@pytest.mark.parametrize("graph", GRAPHS)
def test_float32_takes_the_files_values(graph):
    qm, x = _int8_model(graph)
    m = FQT(qm, FQTConfig(precision="float32"), x[:8])
    for n in m.graph.parametric():
        name, o = n.name, m.w[n.name].shape[0]
        assert m.wqp[name] is None
        np.testing.assert_array_equal(m.w[name], qm.weight_qparams[name].dequantize(qm.weights[name]))
        sx = np.float64(np.float32(qm.act_qparams[n.inputs[0]].scale))
        s_w = np.broadcast_to(qm.weight_qparams[name].scale, (o,)).astype(np.float64)
        np.testing.assert_array_equal(m.b[name], (qm.biases[name] * (sx * s_w)).astype(np.float32))


@pytest.mark.parametrize("prec", ["int8", "uint8", "mixed", "float32"])
def test_an_int8_model_needs_no_calibration_pass(prec):
    """The starting state is the file's whatever samples are given (a float graph's is not)."""
    qm, x = _int8_model("digits-cnn")
    a, b = FQT(qm, FQTConfig(precision=prec), x[:8]), FQT(qm, FQTConfig(precision=prec), 50 * x[8:16])
    (ma, aa), (mb, ab) = a.state(), b.state()
    assert ma == mb and aa.keys() == ab.keys()
    for k in aa:
        np.testing.assert_array_equal(aa[k], ab[k], err_msg=k)
    if prec != "float32":       # float32 keeps no ranges: the graph's own start has none to differ
        ga = FQT(qm.graph, FQTConfig(precision=prec), x[:8])
        gb = FQT(qm.graph, FQTConfig(precision=prec), 50 * x[8:16])
        assert ga.state()[0]["act"] != gb.state()[0]["act"]


@pytest.mark.parametrize("prec", ["uint8", "mixed", "float32"])
def test_a_converted_model_trains(prec):
    qm, x = _int8_model("digits-cnn")
    y = np.arange(len(x)) % 10
    m = FQT(qm, FQTConfig(precision=prec), x[:8])
    w0 = {k: v.copy() for k, v in m.w.items()}
    for _ in range(3):
        assert np.isfinite(m.step(x, y, 0.02).loss)
    assert all(not np.array_equal(m.w[k], w0[k]) for k in m.trainable)
    assert m.trained_model().provenance["fqt"] == {"precision": prec, "steps": 3, "exact": False}
