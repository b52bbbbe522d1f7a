"""Tests of the ZO estimator's fast paths: every shortcut gives the same integers as the plain sums."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.engines import int_engine, ptq
from mcutrain.methods import zo_estimator as est
from mcutrain.methods import zo_forward as zf
from mcutrain.quant.rng import XorShift32


@pytest.fixture(scope="module")
def small():
    """conv -> maxpool -> two linears; B * d_out of every layer is not a multiple of 32."""
    nodes = [G.conv2d("conv", G.INPUT, 5, 3, stride=1, padding=1, act="relu", in_channels=2),
             G.maxpool("pool", "conv", 2, 2),
             G.flatten("flat", "pool"),
             G.linear("fc1", "flat", 7, in_features=3 * 3 * 5, act="relu"),
             G.linear("fc2", "fc1", 3, in_features=7)]
    g = zoo.he_init(G.Graph((7, 7, 2), nodes, "small"), seed=2)
    rng = np.random.default_rng(4)
    x = rng.random((9, 7, 7, 2), dtype=np.float32)
    y = rng.integers(0, 3, 9)
    qm = ptq.quantize_model(g, x)
    base = int_engine.run(qm, int_engine.quantize_input(qm, x))
    l0 = est.per_sample_loss(qm, base[g.output].reshape(len(x), -1), y)
    return qm, base, y, l0


@pytest.mark.parametrize("mag", [1_000, 2**24, 2**40, 2**58])
def test_signed_sum_is_the_exact_sum_at_every_magnitude(mag):
    rng = np.random.default_rng(mag % 97)
    dl = rng.integers(-mag, mag, 40, dtype=np.int64)
    u = (1 - 2 * rng.integers(0, 2, (40, 70))).astype(np.int8)
    want = [sum(int(a) * int(b) for a, b in zip(dl, u[:, j])) for j in range(70)]
    got = est.signed_sum(dl, u)
    assert got.dtype == np.int64 and got.tolist() == want


def _grads(g):
    return {k: (v.w_sum.tolist(), v.b_sum.tolist(), v.w_coef.tolist(),
                v.extra.get("node_grad", np.zeros(0)).tolist()) for k, v in g.items()}


@pytest.mark.parametrize("kind,layer", [("np", "conv"), ("np", "fc1"), ("wp", "conv"), ("wp", "fc1")])
def test_int32_shortcuts_and_chunking_give_the_wide_sums(small, monkeypatch, kind, layer):
    qm, base, y, l0 = small
    unit = est.make_unit(qm, kind, (layer,))

    def run(budget):
        rng = XorShift32(11)
        if kind == "np":
            g = est.estimate_np(qm, base, y, l0, unit, rng, 9, 40, True, budget=budget)
        else:
            g = est.estimate_wp(qm, base, y, l0, unit, rng, 9, 3, 500, True, budget=budget)
        return _grads(g), rng.state

    fast = run(1 << 24)
    assert run(1) == fast                                     # one query per chunk
    monkeypatch.setattr(est, "INT32_SUM_LIMIT", 0)            # every sum takes the int64 path
    assert run(1) == fast
    assert run(1 << 24) == fast
    grads, _ = fast
    assert any(np.any(np.asarray(t[0]) != 0) for t in grads.values())   # the sums are not all zero


def test_np_perturbed_outputs_are_the_two_clamped_choices(small):
    qm, base, _, _ = small
    yb = base["conv"]
    m = est.saturation_mask(qm, "conv", yb).reshape(-1)
    assert yb.size % 32 and 0 < m.sum() < m.size
    lo, hi = qm.act_range("conv")
    for sigma in (3, 200, 1000):
        plus, flip = est._node_choices(yb.reshape(-1), m, sigma, (lo, hi))
        n = yb.size
        want_p = np.clip(yb.reshape(-1).astype(int) + sigma * m.astype(int), lo, hi)
        want_m = np.clip(yb.reshape(-1).astype(int) - sigma * m.astype(int), lo, hi)
        assert plus.view(np.int8)[:n].tolist() == want_p.tolist()
        assert (plus ^ flip).view(np.int8)[:n].tolist() == want_m.tolist()
        assert plus.size % 32 == 0 and not plus[n:].any() and not flip[n:].any()


def test_linear_weight_sets_side_by_side_equal_one_gemm_each(small):
    qm, base, _, _ = small
    node = qm.graph.node("fc1")
    rng = np.random.default_rng(8)
    w = rng.integers(-127, 128, (4, *qm.weights["fc1"].shape)).astype(np.int8)
    b = rng.integers(-5000, 5000, (4, w.shape[1])).astype(np.int32)
    x = base["flat"]
    shared = zf.param_fwd_multi(qm, node, x[None], w, b)                       # one GEMM, Qx = 1
    stacked = zf.param_fwd_multi(qm, node, np.broadcast_to(x[None], (4, *x.shape)), w, b)
    assert shared.shape == (4, len(x), w.shape[1]) and np.array_equal(shared, stacked)
    for q in range(4):
        qm2_w, qm2_b = qm.weights["fc1"], qm.biases["fc1"]
        qm.weights["fc1"], qm.biases["fc1"] = w[q], b[q]
        try:
            want = int_engine.run_node(qm, node, [x])
        finally:
            qm.weights["fc1"], qm.biases["fc1"] = qm2_w, qm2_b
        assert np.array_equal(shared[q], want)


def _wp_sums_reference(qm, base, y, l0, layers, rng, n, sigma_w, sigma_b, masks):
    """The WP sums the plain way: ±1 signs, `perturbed_params`, an int64 ``dl @ u``."""
    sizes = [(qm.weights[m].size, qm.biases[m].size) for m in layers]
    u = rng.rademacher_packed(n, sum(a + b for a, b in sizes))
    producers, off = {}, 0
    for m, (nw, nb) in zip(layers, sizes):
        uw = u[:, off:off + nw].reshape(n, *qm.weights[m].shape) * masks[m][0].astype(np.int8)
        ub = u[:, off + nw:off + nw + nb] * masks[m][1].astype(np.int8)
        off += nw + nb
        wq, bq = est.perturbed_params(qm.weights[m], qm.biases[m], uw, ub, sigma_w, sigma_b)
        producers[m] = zf.WeightSets(qm, qm.graph.node(m), wq, bq)
    logits = zf.run_queries(qm, base, n, producers)
    dl = (est.per_sample_loss(qm, logits, np.tile(y, n)).reshape(n, len(y)) - l0[None]).sum(axis=1)
    return dl @ u.astype(np.int64)


@pytest.mark.parametrize("sigma_w", [1, 2, 300])
def test_wp_with_entry_masks_equals_the_plain_sums(small, sigma_w):
    qm, base, y, l0 = small
    layers = ("conv", "fc1")                          # model-wise over two layers
    rng = np.random.default_rng(sigma_w)
    masks = {m: (rng.integers(0, 2, qm.weights[m].shape), rng.integers(0, 2, qm.biases[m].shape))
             for m in layers}
    unit = est.make_unit(qm, "wp", layers)
    g = est.estimate_wp(qm, base, y, l0, unit, XorShift32(5), 6, sigma_w, 700, True, masks, budget=1)
    s = _wp_sums_reference(qm, base, y, l0, layers, XorShift32(5), 6, sigma_w, 700, masks)
    off = 0
    for m in layers:
        nw, nb = qm.weights[m].size, qm.biases[m].size
        assert g[m].w_sum.tolist() == (s[off:off + nw].reshape(qm.weights[m].shape) * masks[m][0]).tolist()
        assert g[m].b_sum.tolist() == (s[off + nw:off + nw + nb] * masks[m][1]).tolist()
        off += nw + nb
    assert np.any(g["conv"].w_sum != 0)


def test_perturbed_bounds_cover_every_set_and_never_hide_an_overflow(small):
    qm, base, _, _ = small
    node = qm.graph.node("fc1")
    w, b = qm.weights["fc1"], qm.biases["fc1"]
    rng = XorShift32(3)
    u = rng.rademacher_packed(16, w.size + b.size)
    wq, bq = est.perturbed_params(w, b, u[:, :w.size].reshape(16, *w.shape), u[:, w.size:], 2, 900)
    l1_up, b_up = est.perturbed_bounds(w, b, 2, 900)
    assert np.all(np.abs(wq.reshape(16, len(w), -1).astype(np.int64)).sum(axis=2) <= l1_up)
    assert np.all(np.abs(bq.astype(np.int64)) <= b_up)
    x = base["flat"][None]
    assert np.array_equal(zf.param_fwd_multi(qm, node, x, wq, bq, bounds=(l1_up, b_up)),
                          zf.param_fwd_multi(qm, node, x, wq, bq))
    huge = np.full(len(w), 2**31 - 10, np.int64)                 # the bounds alone would not prove safety
    big_b = np.full_like(bq, 2**31 - 10)
    with pytest.raises(int_engine.AccumulatorOverflow, match="int32 accumulator"):
        zf.param_fwd_multi(qm, node, x, wq, big_b, bounds=(l1_up, huge))


@pytest.mark.parametrize("layer", ["conv", "fc1"])
def test_local_gradient_stays_exact_when_its_sums_pass_2_53(small, layer):
    qm, base, _, _ = small
    node = qm.graph.node(layer)
    x = base[node.inputs[0]]
    rng = np.random.default_rng(6)
    g_acc = rng.integers(-2**46, 2**46, base[layer].shape, dtype=np.int64)
    pw, pb = est.local_weight_grad(qm, layer, x, g_acc)
    zx = qm.zero_point(node.inputs[0])
    if layer == "fc1":
        xc = x.reshape(len(x), -1).astype(object) - zx
        want = g_acc.reshape(-1, g_acc.shape[-1]).astype(object).T.dot(xc)
    else:                                   # 3x3 conv, padding 1, stride 1: the sum over taps
        xp = np.pad(x.astype(object) - zx, ((0, 0), (1, 1), (1, 1), (0, 0)))
        h, w = x.shape[1:3]
        want = np.zeros(qm.weights[layer].shape, object)
        for i in range(3):
            for j in range(3):
                want[:, i, j, :] = np.einsum("bhwo,bhwc->oc", g_acc.astype(object),
                                             xp[:, i:i + h, j:j + w, :])
    assert pw.dtype == np.int64 and pw.tolist() == np.asarray(want).tolist()
    assert pb.tolist() == g_acc.reshape(-1, g_acc.shape[-1]).sum(axis=0).tolist()
