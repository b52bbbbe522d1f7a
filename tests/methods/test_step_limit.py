"""The ZO weight-step limit (`methods/step_limit.py`): steps clamped per weight, biases untouched."""

from __future__ import annotations

import numpy as np
import pytest
from reference_zo import reference_step

from mcutrain import zoo
from mcutrain.engines import ptq
from mcutrain.methods import qas
from mcutrain.methods.step_limit import NO_LIMIT, apply_limited_weight_update, c_max_step, limited_steps
from mcutrain.methods.zo import ZOConfig, ZOMethod, copy_quant_model


def test_steps_are_clamped_per_weight_and_keep_their_sign():
    sums = np.array([[1000, -1000, 30, -30, 0]], np.int64)
    k = np.array([0.01], np.float32)                       # steps 10, -10, 0.3 -> 0, -0.3 -> 0, 0
    np.testing.assert_array_equal(qas.integer_steps(sums, k), [[10, -10, 0, 0, 0]])
    np.testing.assert_array_equal(limited_steps(sums, k, 2), [[2, -2, 0, 0, 0]])
    np.testing.assert_array_equal(limited_steps(sums, k, 0), [[10, -10, 0, 0, 0]])


def test_the_limit_saturates_like_the_int8_range():
    w = np.array([[127, -127, 5]], np.int8)
    sums = np.array([[-10**6, 10**6, 400]], np.int64)
    k = np.array([1.0], np.float32)
    np.testing.assert_array_equal(apply_limited_weight_update(w, sums, k, 3), [[127, -127, 2]])
    # "off" in C is 254: it gives the unlimited update on every int8 weight
    assert c_max_step(0) == NO_LIMIT == c_max_step(10**6)
    np.testing.assert_array_equal(apply_limited_weight_update(w, sums, k, NO_LIMIT),
                                  qas.apply_weight_update(w, sums, k))


def _zo(max_step: int) -> tuple[ZOMethod, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.random((16, 8, 8, 1), dtype=np.float32)
    y = rng.integers(0, 10, 16)
    qm = ptq.quantize_model(zoo.build("digits-cnn", seed=1), x)
    return ZOMethod(qm, ZOConfig(queries=4, seed=3, max_step=max_step)), x, y


def test_a_zo_step_moves_no_weight_more_than_max_step():
    free, x, y = _zo(0)
    limited, _, _ = _zo(1)
    w0 = {n: free.qm.weights[n].astype(int) for n in free.layers}
    free.step(x, y, 5.0)
    limited.step(x, y, 5.0)
    moved_free = max(int(np.abs(free.qm.weights[n] - w0[n]).max()) for n in free.layers)
    moved_limited = max(int(np.abs(limited.qm.weights[n] - w0[n]).max()) for n in free.layers)
    assert moved_free > 1 and moved_limited == 1
    for n in free.layers:                                   # the same estimates, the same biases
        np.testing.assert_array_equal(limited.qm.biases[n], free.qm.biases[n])
    assert limited.rng.state == free.rng.state


@pytest.mark.parametrize("bad", [-1, NO_LIMIT + 1])
def test_out_of_range_limits_are_refused(bad):
    rng = np.random.default_rng(0)
    qm = ptq.quantize_model(zoo.build("digits-cnn", seed=1), rng.random((4, 8, 8, 1), dtype=np.float32))
    with pytest.raises(ValueError, match="max_step"):
        ZOMethod(qm, ZOConfig(max_step=bad))


def test_the_limited_step_equals_the_plain_loop_reference():
    free, x, y = _zo(0)
    cfg = ZOConfig(queries=4, seed=3, max_step=1)
    m = ZOMethod(free.qm, cfg)
    w_ref, b_ref, state = reference_step(copy_quant_model(free.qm), x, y, 5.0, cfg, m.rng.state)
    free.step(x, y, 5.0)
    m.step(x, y, 5.0)
    assert m.rng.state == state
    assert any(np.any(m.qm.weights[n] != free.qm.weights[n]) for n in m.layers)   # the limit acted
    for n in m.layers:
        np.testing.assert_array_equal(m.qm.weights[n], w_ref[n], err_msg=n)
        np.testing.assert_array_equal(m.qm.biases[n], b_ref[n], err_msg=n)
