"""The query kernels' requantization (`zo_forward._requantize_sets`, through
`fixedpoint.requantize_products`): the float64 form, checked bit for bit against the int64 rule
on the accumulators real ZO steps produce."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.engines import int_engine, ptq
from mcutrain.methods import zo_forward as zf
from mcutrain.methods.zo import ZOConfig, ZOMethod
from mcutrain.quant import fixedpoint
from mcutrain.quant.fixedpoint import requantize_output


def _captured(monkeypatch, arch: str, shape: tuple[int, int, int], perturb: str, trainable: str):
    """Every call of the query kernels' requantization during one ZO step, with its result."""
    calls = []

    def spy(acc, mult, shift, zp, lo, hi, **kw):
        y = requantize_output(acc, mult, shift, zp, lo, hi, **kw)
        calls.append((np.array(acc), mult, shift, zp, lo, hi, kw, y))
        return y
    g = zoo.build(arch, 10, shape, seed=1)
    rng = np.random.default_rng(2)
    for n in g.parametric():
        n.params["bias"] = rng.normal(0, 0.05, n.params["bias"].shape).astype(np.float32)
    x = rng.random((8, *shape), dtype=np.float32)
    m = ZOMethod(ptq.quantize_model(g, x), ZOConfig(queries=4, perturb=perturb, trainable=trainable))
    monkeypatch.setattr(fixedpoint, "requantize_output", spy)   # what requantize_products calls
    m.step(x, rng.integers(0, 10, 8), 0.05)
    return calls


@pytest.mark.parametrize("arch, shape, perturb, trainable", [
    ("small-cnn", (28, 28, 1), "wp", "all"), ("small-cnn", (28, 28, 1), "np", "all"),
    ("mcunet-5fps", (32, 32, 3), "mix", "last:8")])
def test_float64_requantization_equals_the_int64_rule_on_captured_accumulators(
        monkeypatch, arch, shape, perturb, trainable):
    calls = _captured(monkeypatch, arch, shape, perturb, trainable)
    floats = 0
    for acc, mult, shift, zp, lo, hi, kw, y in calls:
        exact = acc.astype(np.int64) + np.asarray(kw["bias"], np.int64)
        assert np.array_equal(exact, acc + np.asarray(kw["bias"], np.float64))  # acc held exact integers
        assert int(np.abs(exact).max(initial=0)) <= kw["acc_max"]              # the bound of the comment
        reference = requantize_output(exact, mult, shift, zp, lo, hi)          # int64, no bound given
        assert reference.dtype == y.dtype and np.array_equal(reference, y)
        floats += acc.dtype.kind == "f"
    assert floats > 0 and len(calls) > 3   # the float64 form really ran


def test_base_pass_equals_the_engine():
    g = zoo.build("mcunet-5fps", 10, (32, 32, 3), seed=0)
    x = np.random.default_rng(0).random((4, 32, 32, 3), dtype=np.float32)
    qm = ptq.quantize_model(g, x)
    x_q = int_engine.quantize_input(qm, x)
    mine, engine = zf.run_base(qm, x_q), int_engine.run(qm, x_q)
    assert mine.keys() == engine.keys()
    for k in engine:
        assert mine[k].dtype == engine[k].dtype and np.array_equal(mine[k], engine[k]), k
