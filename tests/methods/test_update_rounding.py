"""`--update-rounding stochastic` (zo, bp-qas): which draws round which int8 weight, exactly."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.engines import ptq
from mcutrain.methods import qas
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.zo import ZOConfig, ZOMethod
from mcutrain.quant.rng import XorShift32


def _linear_model():
    nodes = [G.flatten("flat", G.INPUT), G.linear("fc", "flat", 3, in_features=16)]
    g = zoo.he_init(G.Graph((4, 4, 1), nodes, "one-linear"), seed=2)
    rng = np.random.default_rng(0)
    x = rng.random((8, 4, 4, 1), dtype=np.float32)
    return ptq.quantize_model(g, x), x, rng.integers(0, 3, 8)


def _scale(m, name: str) -> np.ndarray:
    o = m.qm.weights[name].shape[0]
    return np.broadcast_to(m.qm.weight_qparams[name].scale, (o,)).astype(np.float32)


def test_bp_qas_rounds_each_weight_with_one_draw_of_its_stream():
    qm, x, y = _linear_model()
    m = BPQASMethod(qm, BPQASConfig(update_rounding="stochastic", seed=9))
    w0 = m.qm.weights["fc"].copy()
    grads, _ = m.gradients(x, y)
    k = qas.update_factor(0.3, np.ones(3, np.float32), _scale(m, "fc"))
    delta = np.clip(grads["fc.weight"] * k[:, None], -qas.STEP_LIMIT, qas.STEP_LIMIT)
    stream = XorShift32(9)
    r = stream.uniform01(w0.size).reshape(w0.shape)
    want = np.clip(w0.astype(np.int64) - np.floor(delta + r).astype(np.int64), -127, 127)
    m.step(x, y, 0.3)
    np.testing.assert_array_equal(m.qm.weights["fc"], want)
    assert m.rng.state == stream.state and m.state()[0] == {"rng": stream.state}


def test_zo_unit_draws_its_rounding_before_its_queries():
    """One unit: its rounding takes the stream's first draws; the estimate the draws after them."""
    qm, x, y = _linear_model()
    cfg = ZOConfig(queries=3, perturb="wp", seed=4, max_step=0)   # the rounding alone, no step limit
    sto = ZOMethod(qm, ZOConfig(**{**cfg.__dict__, "update_rounding": "stochastic"}))
    near = ZOMethod(qm, cfg)
    size = qm.weights["fc"].size
    r = near.rng.uniform01(size).reshape(qm.weights["fc"].shape)   # the same stream, advanced past them
    grads, _ = near.estimate(x, y)
    gr = grads["fc"]
    kw = qas.update_factor(2.0, gr.w_coef, _scale(near, "fc"))
    want = qas.apply_weight_update(qm.weights["fc"], gr.w_sum, kw, r)
    sto.step(x, y, 2.0)
    np.testing.assert_array_equal(sto.qm.weights["fc"], want)
    assert sto.rng.state == near.rng.state


def test_stochastic_rounding_moves_weights_nearest_rounds_to_nothing():
    """A rate whose every update is below half a step: nearest moves no weight, stochastic some."""
    qm, x, y = _linear_model()
    moved = {}
    for mode in qas.UPDATE_ROUNDINGS:
        m = BPQASMethod(qm, BPQASConfig(update_rounding=mode))
        m.step(x, y, 1e-3)
        moved[mode] = int(np.sum(m.qm.weights["fc"] != qm.weights["fc"]))
    assert moved["nearest"] == 0 and moved["stochastic"] > 0


@pytest.mark.parametrize("make", [lambda qm: BPQASMethod(qm, BPQASConfig(update_rounding="up")),
                                  lambda qm: ZOMethod(qm, ZOConfig(update_rounding="up"))])
def test_unknown_rounding_is_refused(make):
    with pytest.raises(ValueError, match="update_rounding must be one of nearest, stochastic"):
        make(_linear_model()[0])
