"""Tests of the `zo` method: bit-exact against the direct-loop reference, estimator properties."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from reference_zo import direct_local_grad, reference_step

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.engines import int_engine, ptq
from mcutrain.methods import zo_estimator as est
from mcutrain.methods import zo_forward as zf
from mcutrain.methods.zo import ZOConfig, ZOMethod, plan_units
from mcutrain.methods.zo_select import select_by_score, select_by_test
from mcutrain.quant.rng import XorShift32


def _tiny_cnn() -> G.Graph:
    nodes = [G.conv2d("conv1", G.INPUT, 3, 3, padding=1, act="relu", in_channels=1),
             G.conv2d("dw", "conv1", 3, 3, stride=2, padding=(1, 1, 0, 2), groups=3, act="relu6",
                      in_channels=3),
             G.flatten("flat", "dw"),
             G.linear("fc", "flat", 4, in_features=3 * 3 * 3)]
    return zoo.he_init(G.Graph((5, 5, 1), nodes, "tiny"), seed=3)


@pytest.fixture(scope="module")
def tiny():
    rng = np.random.default_rng(0)
    x = rng.random((6, 5, 5, 1), dtype=np.float32)
    y = rng.integers(0, 4, 6)
    g = _tiny_cnn()
    for n in g.parametric():
        n.params["bias"] = rng.normal(0, 0.1, n.params["bias"].shape).astype(np.float32)
    return ptq.quantize_model(g, x), x, y


@pytest.mark.parametrize("perturb", ["mix", "wp", "np", "model-wp"])
def test_step_equals_direct_loop_reference(tiny, perturb):
    qm, x, y = tiny
    cfg = ZOConfig(queries=3, perturb=perturb, seed=7)
    m = ZOMethod(qm, cfg)
    state0 = m.rng.state
    m.step(x, y, lr=0.5)
    w_ref, b_ref, st = reference_step(qm, x, y, 0.5, cfg, state0)
    assert m.rng.state == st
    changed = 0
    for name in m.layers:
        assert np.array_equal(m.qm.weights[name], w_ref[name]), name
        assert np.array_equal(m.qm.biases[name], b_ref[name]), name
        changed += int(np.sum(m.qm.weights[name] != qm.weights[name]))
        changed += int(np.sum(m.qm.biases[name] != qm.biases[name]))
    assert changed > 0   # the step really moved something, so equality is not trivial


def test_mixture_takes_the_lower_dimension(tiny):
    qm, _, _ = tiny
    kinds = {u.layers[0]: (u.kind, u.dim) for u in plan_units(qm, ["conv1", "dw", "fc"], "mix")}
    # conv1: 30 params vs 75 outputs -> WP; dw: 30 params vs 27 outputs -> NP; fc: 112 vs 4 -> NP
    assert kinds == {"conv1": ("wp", 30), "dw": ("np", 27), "fc": ("np", 4)}
    units = plan_units(qm, ["conv1", "dw", "fc"], "mix:fc")
    assert [u.kind for u in units] == ["wp", "wp", "np"]


def test_query_chunking_and_batch_layout_do_not_change_anything(tiny):
    qm, x, y = tiny
    a = ZOMethod(qm, ZOConfig(queries=5, seed=3))
    b = ZOMethod(qm, ZOConfig(queries=5, seed=3, budget=1))   # one query per chunk
    a.step(x, y, 0.3)
    b.step(x, y, 0.3)
    for n in a.layers:
        assert np.array_equal(a.qm.weights[n], b.qm.weights[n])
        assert np.array_equal(a.qm.biases[n], b.qm.biases[n])
    assert a.rng.state == b.rng.state
    # the packed signs drawn in one vectorized call equal bits of sequential draws
    g1, g2 = XorShift32(9), XorShift32(9)
    words = [g1.next_u32() for _ in range(3 * 32)]        # 3 rows of 1000 signs: 32 draws each
    seq = np.array([[1 - 2 * ((words[32 * r + e // 32] >> (e % 32)) & 1) for e in range(1000)]
                    for r in range(3)])
    assert np.array_equal(g2.rademacher_packed(3, 1000), seq)
    assert g1.state == g2.state


def test_partial_pass_equals_full_engine_pass():
    rng = np.random.default_rng(1)
    g = zoo.build("mcunet-5fps", input_shape=(32, 32, 3), seed=1)
    x = rng.random((2, 32, 32, 3), dtype=np.float32)
    qm = ptq.quantize_model(g, x)
    base = int_engine.run(qm, int_engine.quantize_input(qm, x))
    name = "blocks.3.dw"            # a depthwise layer inside residual blocks
    w = qm.weights[name]
    wq = np.stack([w, np.clip(w.astype(np.int16) + 1, -127, 127).astype(np.int8)])
    bq = np.stack([qm.biases[name]] * 2)
    node = g.node(name)
    logits = zf.run_queries(qm, base, 2, {name: lambda xx: zf.param_fwd_multi(qm, node, xx, wq, bq)})
    assert np.array_equal(logits[:2], base[g.output].reshape(2, -1))
    qm.weights[name] = wq[1]
    full = int_engine.forward(qm, int_engine.quantize_input(qm, x))
    qm.weights[name] = w
    assert np.array_equal(logits[2:], full)


@pytest.mark.parametrize("layer", ["conv1", "dw", "fc"])
def test_np_local_gradient_is_the_exact_product(tiny, layer):
    qm, x, _ = tiny
    base = int_engine.run(qm, int_engine.quantize_input(qm, x))
    node = qm.graph.node(layer)
    rng = np.random.default_rng(5)
    g_acc = rng.integers(-10**6, 10**6, base[layer].shape).astype(np.int64)
    pw, pb = est.local_weight_grad(qm, layer, base[node.inputs[0]], g_acc)
    rw, rb = direct_local_grad(qm, layer, base[node.inputs[0]], g_acc)
    assert pw.dtype == np.int64
    assert pw.tolist() == np.asarray(rw).tolist()
    assert pb.tolist() == list(rb)


def test_estimator_is_unbiased_on_a_quadratic():
    rng = np.random.default_rng(0)
    d = 20
    a = rng.integers(1, 5, d)
    target = rng.integers(-50, 50, d)
    theta = np.zeros(d, np.int64)

    def f(t):   # integer quadratic sum a (t - target)^2 over stacked parameter vectors
        return ((t - target) ** 2 * a).sum(axis=1)

    true = 2 * a * (theta - target)
    est_sum = np.zeros(d)
    for seed in range(1, 21):
        s, _ = est.forward_difference(f, theta, 1, 200, XorShift32(seed), gns=False)
        est_sum += s / 200.0
    g = est_sum / 20
    cos = g @ true / (np.linalg.norm(g) * np.linalg.norm(true))
    assert cos > 0.99
    # and a single estimate with many queries already points the right way
    s, gamma = est.forward_difference(f, theta, 1, 2000, XorShift32(5))
    assert (s @ true) / (np.linalg.norm(s) * np.linalg.norm(true)) > 0.9
    assert gamma == np.float32(2000) / np.float32(2019)


def test_wp_sums_match_the_generic_estimator(tiny):
    qm, x, y = tiny
    layer = "conv1"
    unit = est.make_unit(qm, "wp", (layer,))
    base = int_engine.run(qm, int_engine.quantize_input(qm, x))
    l0 = est.per_sample_loss(qm, base[qm.graph.output].reshape(len(x), -1), y)
    grads = est.estimate_wp(qm, base, y, l0, unit, XorShift32(4), 6, 1, 1, True)
    nw = qm.weights[layer].size
    w0, b0 = qm.weights[layer].copy(), qm.biases[layer].copy()

    def f(thetas):   # batch loss of each parameter vector (sigma 1 for weights and biases here)
        out = []
        for t in thetas:
            qm.weights[layer] = np.clip(t[:nw], -127, 127).astype(np.int8).reshape(w0.shape)
            qm.biases[layer] = t[nw:].astype(np.int32)
            lg = int_engine.forward(qm, int_engine.quantize_input(qm, x))
            out.append(int(est.per_sample_loss(qm, lg, y).sum()))
        qm.weights[layer], qm.biases[layer] = w0, b0
        return np.array(out)

    s, _ = est.forward_difference(f, np.concatenate([w0.reshape(-1), b0]).astype(np.int64), 1, 6,
                                  XorShift32(4))
    assert np.array_equal(grads[layer].w_sum.reshape(-1), s[:nw])
    assert np.array_equal(grads[layer].b_sum, s[nw:])


def test_zo_learns_digits_and_resumes_exactly():
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.images / 16).astype(np.float32)[..., None][:300]
    y = d.target[:300]
    qm = ptq.quantize_model(zoo.build("digits-cnn", seed=0), x[:100])
    m = ZOMethod(qm, ZOConfig(queries=8, trainable="last:2", seed=2))
    losses = [m.step(x[i:i + 100], y[i:i + 100], 0.05).loss for i in (0, 100, 200, 0, 100, 200)]
    assert losses[3] + losses[4] + losses[5] < losses[0] + losses[1] + losses[2]
    meta, arrays = m.state()
    a, b = ZOMethod(qm, m.cfg), ZOMethod(qm, m.cfg)
    a.load_state(meta, arrays)
    b.load_state(meta, arrays)
    a.step(x[:100], y[:100], 0.05)
    b.step(x[:100], y[:100], 0.05)
    assert all(np.array_equal(a.qm.weights[n], b.qm.weights[n]) for n in a.layers)


def test_without_qas_the_integer_updates_vanish(tiny):
    qm, x, y = tiny
    m = ZOMethod(qm, ZOConfig(queries=4, qas=False, trainable="layers:fc"))
    m.step(x, y, 0.05)
    assert np.array_equal(m.qm.weights["fc"], qm.weights["fc"])
    q = ZOMethod(qm, ZOConfig(queries=4, trainable="layers:fc"))
    q.step(x, y, 0.05)
    assert not np.array_equal(q.qm.weights["fc"], qm.weights["fc"])


def test_masks_and_selection(tiny):
    qm, x, y = tiny
    m = ZOMethod(qm, ZOConfig(queries=3, perturb="wp", mask="randk:0.5", trainable="layers:conv1"))
    grads, _ = m.estimate(x, y)
    assert int(np.count_nonzero(grads["conv1"].w_sum)) <= 15 + 3
    assert grads["conv1"].extra["dim"] == 15
    t = ZOMethod(qm, ZOConfig(queries=3, perturb="np", mask="topk:0.34", trainable="layers:conv1"))
    grads, _ = t.estimate(x, y)
    assert grads["conv1"].extra["dim"] == 25    # one of three channels of a 5x5 output
    cfg = ZOConfig(queries=3, seed=4)
    pick = select_by_score(qm, x, y, ["conv1", "dw", "fc"], 2, cfg)
    assert len(pick) == 2 and pick == select_by_score(qm, x, y, ["conv1", "dw", "fc"], 2, cfg)
    assert len(select_by_test(qm, x, y, x, y, ["conv1", "fc"], 1, 0.1, replace(cfg))) == 1
    with pytest.raises(ValueError, match="mask"):
        ZOMethod(qm, ZOConfig(mask="top:3"))


def test_schedule_and_step_counts(tiny):
    qm, x, y = tiny
    m = ZOMethod(qm, ZOConfig(queries=4))
    st = m.step(x, y, 0.1)
    assert st.forward_passes == 1 + 4 * 3
    sch = m.schedule(len(x))
    assert [s["kind"] for s in sch] == ["wp", "np", "np"]
    assert sch[1]["cached"] == ("conv1", "dw") and sch[1]["rerun"] == ("flat", "fc")
    assert sch[1]["draws"] == 4 * 6      # 4 queries x ceil(6 samples x 27 outputs / 32 signs per draw)
    assert sch[0]["draws"] == 4 * 1      # conv1: 30 parameters, one draw per query


def test_fused_conv_pool_queries_equal_full_engine_passes():
    rng = np.random.default_rng(2)
    g = zoo.build("small-cnn", input_shape=(8, 8, 1), seed=2)
    x = rng.random((3, 8, 8, 1), dtype=np.float32)
    qm = ptq.quantize_model(g, x)
    base = int_engine.run(qm, int_engine.quantize_input(qm, x))
    for layer, pool in (("conv1", "pool1"), ("conv2", "pool2")):
        node = g.node(layer)
        assert zf.fusable_pool(qm, node).name == pool
        w, b = qm.weights[layer], qm.biases[layer]
        wq = np.clip(w[None].astype(np.int16) + rng.integers(-3, 4, (4, *w.shape)), -127, 127).astype(np.int8)
        bq = (b[None] + rng.integers(-300, 300, (4, len(b)))).astype(np.int32)
        logits = zf.run_queries(qm, base, 4, {layer: zf.WeightSets(qm, node, wq, bq)})
        unfused = zf.run_queries(qm, base, 4, {layer: lambda xx, wq=wq, bq=bq, node=node:
                                               zf.param_fwd_multi(qm, node, xx, wq, bq)})
        assert np.array_equal(logits, unfused)
        for i in range(4):
            qm.weights[layer], qm.biases[layer] = wq[i], bq[i]
            full = int_engine.forward(qm, int_engine.quantize_input(qm, x))
            assert np.array_equal(logits[3 * i:3 * i + 3], full), (layer, i)
        qm.weights[layer], qm.biases[layer] = w, b
    assert zf.fusable_pool(qm, g.node("fc1")) is None
