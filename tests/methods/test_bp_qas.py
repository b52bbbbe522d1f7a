"""Tests of `bp-qas` and its STE backward kernels."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.engines import float_engine as fe
from mcutrain.engines import ptq
from mcutrain.engines import ste_kernels as sk
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod


def _conv_graph(groups: int, cin: int, cout: int) -> G.Graph:
    return G.Graph((6, 7, cin), [G.conv2d("c", G.INPUT, cout, 3, stride=(2, 1), padding=(1, 0, 2, 1),
                                          groups=groups, in_channels=cin)], "c")


@pytest.mark.parametrize("groups,cin,cout", [(1, 3, 4), (2, 4, 6), (4, 4, 8)])
def test_conv_backward_kernels_match_the_float_engine(groups, cin, cout):
    """With integer-valued float tensors, the STE kernels are the ordinary conv adjoints."""
    rng = np.random.default_rng(groups)
    g = _conv_graph(groups, cin, cout)
    node = g.node("c")
    w = rng.integers(-127, 128, node.params["weight"].shape).astype(np.int8)
    node.params["weight"] = w.astype(np.float32)
    x = rng.integers(-128, 128, (2, 6, 7, cin)).astype(np.int8)
    zx = 3
    acts = fe.run(g, x.astype(np.float32) - zx)
    e = rng.standard_normal(acts["c"].shape).astype(np.float32)
    grads, dx = fe.backward(g, acts, e)
    a = node.attrs
    ex = sk.conv2d_bwd_in_s8_f32(e, w, x.shape, a["stride"], a["padding"], groups)
    gw = sk.conv2d_bwd_w_s8_f32(x, zx, e, w.shape, a["stride"], a["padding"], groups)
    np.testing.assert_allclose(ex, dx, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(gw, grads["c"]["weight"], rtol=1e-5, atol=1e-2)


def test_linear_and_pool_kernels_on_literals():
    e = np.array([[1.0, -2.0]], np.float32)
    w = np.array([[1, 2, 3], [4, 5, 6]], np.int8)
    assert sk.linear_bwd_in_s8_f32(e, w).tolist() == [[-7.0, -8.0, -9.0]]
    assert sk.linear_bwd_w_s8_f32(np.array([[1, 2, 3]], np.int8), 1, e).tolist() == [[0, 1, 2], [0, -2, -4]]
    x = np.array([[[[1], [3]], [[3], [0]]]], np.int8)           # 2x2 window with a tie
    y = np.array([[[[3]]]], np.int8)
    ex = sk.maxpool_bwd_s8_f32(x, y, np.array([[[[5.0]]]], np.float32), (2, 2), (2, 2))
    assert ex[0, :, :, 0].tolist() == [[0, 5], [0, 0]]          # the first maximum in tap order
    assert sk.avgpool_bwd_f32(np.array([[[[4.0]]]], np.float32), (1, 2, 2, 1), (2, 2), (2, 2)).sum() == 4.0
    acc = sk.requant_bwd_f32(np.ones((1, 3), np.float32), np.array([[-128, 0, 127]], np.int8),
                             np.array([0.5, 0.5, 0.5], np.float32), -128, 127)
    assert acc.tolist() == [[0.0, 0.5, 0.0]]                     # saturated outputs pass nothing


def test_bp_qas_learns_digits_and_sparse_update_touches_only_what_it_names():
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.images / 16).astype(np.float32)[..., None]
    y = d.target
    qm = ptq.quantize_model(zoo.build("digits-cnn", seed=0), x[:200])
    m = BPQASMethod(qm, BPQASConfig(momentum=0.9))
    first = m.step(x[:100], y[:100], 0.05).loss
    for i in range(1, 8):
        last = m.step(x[i * 100:(i + 1) * 100], y[i * 100:(i + 1) * 100], 0.05).loss
    assert last < 0.7 * first
    s = BPQASMethod(qm, BPQASConfig(trainable="layers:conv2", bias_last=1, channel_ratio=0.5))
    s.step(x[:100], y[:100], 0.5)
    assert np.array_equal(s.qm.weights["conv1"], qm.weights["conv1"])
    assert np.array_equal(s.qm.biases["conv1"], qm.biases["conv1"])
    assert np.array_equal(s.qm.weights["fc"], qm.weights["fc"])
    assert not np.array_equal(s.qm.biases["fc"], qm.biases["fc"])
    assert np.array_equal(s.qm.weights["conv2"][..., 8:], qm.weights["conv2"][..., 8:])
    assert not np.array_equal(s.qm.weights["conv2"][..., :8], qm.weights["conv2"][..., :8])
    meta, arrays = s.state()
    r = BPQASMethod(qm, s.cfg)
    r.load_state(meta, arrays)
    assert np.array_equal(r.predict(x[:50]), s.predict(x[:50]))


def test_bad_settings_are_refused():
    qm = ptq.quantize_model(zoo.build("digits-cnn"), np.zeros((4, 8, 8, 1), np.float32))
    with pytest.raises(ValueError, match="channel_ratio"):
        BPQASMethod(qm, BPQASConfig(channel_ratio=0))
    with pytest.raises(ValueError, match="bias_last"):
        BPQASMethod(qm, BPQASConfig(bias_last=9))
