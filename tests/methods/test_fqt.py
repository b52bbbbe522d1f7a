"""FQT: one step equals the plain-loop reference bit for bit; resume is exact; loss falls."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from reference_fqt import Ref, tiny_graph

from mcutrain.methods.base import load_state, save_state
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_common import pow2_symmetric_qparams
from mcutrain.methods.fqt_state import PRECISIONS, FQTConfig
from mcutrain.methods.loop import fit
from mcutrain.plan.schedule import Role
from mcutrain.plan.schedules import schedule_for


def _data(n: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 4, 4, 1), dtype=np.float32)
    y = rng.integers(0, 3, n)
    return x, y


def _method(prec: str, lmin: float = 1.0, seed: int = 0, **kw) -> FQT:
    x, _ = _data(8, seed=5)
    cfg = FQTConfig(precision=prec, lambda_min=lmin, exact_float_order=True, seed=seed, alpha_w=0.5, **kw)
    return FQT(tiny_graph(seed), cfg, x)


@pytest.mark.parametrize("prec,lmin,kw", [(p, 1.0, {}) for p in PRECISIONS] + [
    ("int8", 0.4, {}), ("uint8", 0.4, {}), ("float32", 0.4, {}),
    ("int8", 1.0, {"relative_update": True, "weight_rounding": "nearest"}),
    ("uint8", 1.0, {"weight_rounding": "floor"}), ("mixed", 0.4, {"weight_rounding": "floor"}),
    ("int8", 0.4, {"partial_output": True})])
def test_step_equals_reference(prec, lmin, kw):
    m = _method(prec, lmin, **kw)
    x, y = _data()
    m.step(x, y, 0.05)                 # first step initializes the error and gradient ranges
    x2, y2 = _data(seed=1)
    snap = copy.deepcopy(m)
    want = Ref(snap).step(x2, y2, 0.03)
    m.step(x2, y2, 0.03)
    assert m.loss_max == want["loss_max"]
    for name in ("conv", "fc1", "fc2"):
        got_w = m.w[name].reshape(m.w[name].shape[0], -1)
        assert np.array_equal(got_w.astype(np.float64), np.asarray(want["w"][name], np.float64)), name
        assert np.array_equal(m.b[name].astype(np.float64), want["b"][name].astype(np.float64)), name
        mu, sd = want[f"norm/{name}"]
        assert np.array_equal(m.norm[name]["mu"], mu) and np.array_equal(m.norm[name]["sd"], sd), name
        if name in want["wqp"]:
            assert m.wqp[name] == want["wqp"][name], name
    for t, (lo, hi) in want["act"].items():
        if m.act_ema[t].initialized:
            assert (np.float32(m.act_ema[t].lo), np.float32(m.act_ema[t].hi)) == (lo, hi), t
    for t, (lo, hi) in want["err"].items():
        assert (np.float32(m.err_ema[t].lo), np.float32(m.err_ema[t].hi)) == (lo, hi), t
    for t, (lo, hi) in want["grad"].items():
        assert (np.float32(m.grad_ema[t].lo), np.float32(m.grad_ema[t].hi)) == (lo, hi), t
    assert m.rng.state == want["rng"]


def test_float32_sample_loss_does_not_depend_on_its_batch():
    """float32 logits are quantized with each sample's own range: a sample's loss and logits in a
    batch are those it has alone (docs/integer-semantics.md 13.2)."""
    m = _method("float32")
    x, y = _data()
    logits, losses = m.logits_and_losses(x, y)
    alone = [m.logits_and_losses(x[b:b + 1], y[b:b + 1]) for b in range(len(x))]
    np.testing.assert_array_equal(logits, np.concatenate([lg for lg, _ in alone]))
    np.testing.assert_array_equal(losses, np.concatenate([ls for _, ls in alone]))
    ranges = {(float(r.min()), float(r.max())) for r in logits}
    assert len(ranges) > 1        # the samples' ranges differ, so a batch range would change losses


def test_partial_counts_fewer_macs():
    x, y = _data(8)
    full = _method("int8").step(x, y, 0.01)
    part = _method("int8", lmin=0.1).step(x, y, 0.01)
    assert part.macs["forward"] == full.macs["forward"]
    assert part.macs["weight_grad"] < full.macs["weight_grad"]
    assert part.macs["error"] < full.macs["error"]
    # at least one filter per sample and layer; the output layer (fc2, 3 x 4) trains fully
    assert part.macs["weight_grad"] >= 8 * (1 * 9 * 16 + 12 + 3 * 4)


def test_pow2_error_scale():
    qp = pow2_symmetric_qparams(-0.3, 1.0)
    assert float(qp.scale) == 2.0**-6          # 127 / 64 >= 1.0 > 127 / 128
    assert float(pow2_symmetric_qparams(-127 / 64, 0).scale) == 2.0**-6
    assert float(pow2_symmetric_qparams(0, 0).scale) == 2.0**-24


@pytest.mark.parametrize("prec", PRECISIONS)
def test_resume_is_bit_identical(prec, tmp_path):
    rng = np.random.default_rng(3)
    x = rng.random((40, 4, 4, 1), dtype=np.float32)
    y = (x.reshape(40, -1).mean(1) * 6).astype(np.int64) % 3
    kw = dict(epochs=2, batch=8, lr=0.05, seed=1, progress=False)
    a = _method(prec, 0.5)
    fit(a, x, y, x, y, **kw)
    b = _method(prec, 0.5)
    fit(b, x, y, x, y, checkpoint=tmp_path / "c.npz", stop_after_steps=5, **kw)
    save_state(tmp_path / "mid.npz", b, {"x": 1})
    c = _method(prec, 0.5)
    assert load_state(tmp_path / "mid.npz", c) == {"x": 1}
    fit(c, x, y, x, y, resume=tmp_path / "c.npz", **kw)
    ma, aa = a.state()
    mc, ac = c.state()
    assert ma == mc
    assert aa.keys() == ac.keys()
    for k in aa:
        assert np.array_equal(aa[k], ac[k]), k


@pytest.mark.parametrize("prec", PRECISIONS)
def test_loss_falls(prec):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 96)
    x = np.zeros((96, 4, 4, 1), np.float32)
    x[y == 0, :2] = 1.0
    x[y == 1, :, :2] = 1.0
    x[y == 2, 2:, 2:] = 1.0
    x += rng.random(x.shape, dtype=np.float32) * 0.2
    m = FQT(tiny_graph(1), FQTConfig(precision=prec, seed=0), x[:16])
    r = fit(m, x, y, x, y, epochs=6, batch=16, lr=0.05, seed=0, progress=False, schedule="constant")
    assert r.history[-1]["loss"] < 0.7 * r.history[0]["loss"]
    assert r.accuracy_after > 0.8


def test_schedule_lists_phases_and_kept_tensors():
    """The planner's schedule of a built FQT (the one the code generator emits) counts the MACs the
    simulator executes, and keeps what its backward reads."""
    from mcutrain import zoo
    x = np.zeros((4, 28, 28, 1), np.float32)
    m = FQT(zoo.build("small-cnn"), FQTConfig(precision="uint8", trainable="last:2"), x)
    s = schedule_for(m, 32)
    phases = [k.phase for k in s.kernels if k.phase != "weight_grad"]
    assert phases.index("loss") > max(i for i, p in enumerate(phases) if p == "forward")
    assert [k.name for k in s.kernels if k.op == "linear_bwd_w"] == ["fc2.bwd_w", "fc1.bwd_w"]
    assert [k.node for k in s.kernels if k.op == "fqt_update"] == ["fc2", "fc1"]
    # frozen convs keep nothing; fc1's input and the relu'd fc1 output are kept (one sample at a time)
    kept = {n: t.nbytes for n, t in s.tensors.items() if t.role == Role.KEPT}
    assert kept == {"flatten": 1568, "fc1": 64}
    assert [k.node for k in s.kernels if k.op == "linear_bwd_in"] == ["fc2"]   # fc1's input needs no error
    x_step = np.random.default_rng(0).random((32, 28, 28, 1), dtype=np.float32)
    stats = m.step(x_step, np.arange(32) % 10, 0.001)
    planned = s.macs_by_phase()
    assert {p: stats.macs[p] for p in ("forward", "error", "weight_grad")} == \
        {p: planned[p] for p in ("forward", "error", "weight_grad")}


def _residual_graph(seed: int = 0):
    from mcutrain import graph as G
    from mcutrain.zoo import he_init
    nodes = [G.conv2d("stem", "input", 4, 3, padding=1, act="relu6", in_channels=1),
             G.conv2d("dw", "stem", 4, 3, padding=1, groups=4, act="relu", in_channels=4),
             G.conv2d("pw", "dw", 4, 1, in_channels=4),
             G.add("res", "stem", "pw"),
             G.relu6("act", "res"),
             G.avgpool("pool", "act", 2),
             G.global_avgpool("gap", "pool"),
             G.flatten("flat", "gap"),
             G.linear("fc", "flat", 3, in_features=4)]
    return he_init(G.Graph((4, 4, 1), nodes, "residual"), seed)


@pytest.mark.parametrize("prec", PRECISIONS)
def test_depthwise_residual_and_pools_train(prec, tmp_path):
    """Depthwise conv, residual add (a tensor with two consumers), avg/global pools, relu6."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 96)
    x = np.zeros((96, 4, 4, 1), np.float32)
    x[y == 0, :2] = 1.0
    x[y == 1, :, :2] = 1.0
    x[y == 2, 2:, 2:] = 1.0
    x += rng.random(x.shape, dtype=np.float32) * 0.2
    cfg = FQTConfig(precision=prec, seed=0, exact_float_order=True)
    m = FQT(_residual_graph(), cfg, x[:16])
    ops = {k.op for k in schedule_for(m, 16).kernels}
    assert {"error_sum", "global_avgpool_bwd", "avgpool_bwd"} <= ops   # the stem's two errors are summed
    r = fit(m, x, y, x, y, epochs=4, batch=16, lr=0.02, seed=0, progress=False, schedule="constant")
    assert np.isfinite(r.history[-1]["loss"])
    assert r.history[-1]["loss"] < r.history[0]["loss"]
    # the stem output feeds two ops: its error is the combined one, in its own error range
    if prec in ("uint8", "int8"):
        assert "stem" in m.err_ema and m.err_ema["stem"].initialized
    # resume is exact on this graph too
    kw = dict(epochs=2, batch=16, lr=0.02, seed=1, progress=False)
    a = FQT(_residual_graph(), cfg, x[:16])
    fit(a, x, y, x, y, **kw)
    b = FQT(_residual_graph(), cfg, x[:16])
    fit(b, x, y, x, y, checkpoint=tmp_path / "c.npz", stop_after_steps=7, **kw)
    c = FQT(_residual_graph(), cfg, x[:16])
    fit(c, x, y, x, y, resume=tmp_path / "c.npz", **kw)
    sa, sc = a.state(), c.state()
    assert sa[0] == sc[0] and all(np.array_equal(sa[1][k], sc[1][k]) for k in sa[1])
