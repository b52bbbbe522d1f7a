"""The float engine against PyTorch autograd (float32) and finite differences (float64).

Random graphs cover every op and conv variant (stride 1/2, asymmetric
padding, groups = 1 / depthwise / depthwise with multiplier / other groups,
residual add, every fused activation). The PyTorch twin of a Graph is built
here: NHWC <-> NCHW for activations, OHWI <-> OIHW for weights.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mcutrain import zoo
from mcutrain.engines import float_engine as fe
from mcutrain.graph import (
    INPUT,
    Graph,
    Op,
    avgpool,
    conv2d,
    flatten,
    global_avgpool,
    linear,
    maxpool,
    relu,
    relu6,
)
from mcutrain.graph import add as g_add

FWD_TOL = 5e-6   # max |ours - torch| / max |torch|, per tensor, float32 forward
BWD_TOL = 2e-5   # same for gradients: longer float32 reductions in a different order
FD_TOL = 1e-6    # relative error of a float64 directional derivative

torch.set_num_threads(1)


# ---------------------------------------------------------------- the torch twin


def _nchw(a: np.ndarray) -> np.ndarray:
    return a.transpose(0, 3, 1, 2) if a.ndim == 4 else a


def torch_twin(graph: Graph, x: np.ndarray, labels: np.ndarray):
    """Run `graph` in torch; return (tensors in NHWC as numpy, param grads OHWI, input grad, loss)."""
    tx = torch.tensor(_nchw(x), requires_grad=True)
    t = {INPUT: tx}
    leaves = {}
    for node in graph.nodes:
        a, src = node.attrs, [t[s] for s in node.inputs]
        if node.op in (Op.CONV2D, Op.LINEAR):
            w = node.params["weight"]
            tw = torch.tensor(w.transpose(0, 3, 1, 2) if w.ndim == 4 else w, requires_grad=True)
            tb = torch.tensor(node.params["bias"], requires_grad=True)
            leaves[node.name] = (tw, tb)
        if node.op == Op.CONV2D:
            pt, pb, pl, pr = a["padding"]
            y = F.conv2d(F.pad(src[0], (pl, pr, pt, pb)), tw, tb, stride=a["stride"], groups=a["groups"])
        elif node.op == Op.LINEAR:
            y = F.linear(src[0], tw, tb)
        elif node.op == Op.RELU:
            y = F.relu(src[0])
        elif node.op == Op.RELU6:
            y = F.relu6(src[0])
        elif node.op == Op.MAXPOOL:
            y = F.max_pool2d(src[0], a["kernel"], a["stride"])
        elif node.op == Op.AVGPOOL:
            y = F.avg_pool2d(src[0], a["kernel"], a["stride"])
        elif node.op == Op.GLOBAL_AVGPOOL:
            y = src[0].mean((2, 3), keepdim=True)
        elif node.op == Op.FLATTEN:
            y = src[0].permute(0, 2, 3, 1).reshape(src[0].shape[0], -1)  # NHWC order
        elif node.op == Op.ADD:
            y = src[0] + src[1]
        else:  # pragma: no cover
            raise AssertionError(node.op)
        if node.act == "relu":
            y = F.relu(y)
        elif node.act == "relu6":
            y = F.relu6(y)
        y.retain_grad()
        t[node.name] = y
    loss = F.cross_entropy(t[graph.output], torch.tensor(labels))
    loss.backward()
    nhwc = lambda v: v.permute(0, 2, 3, 1).numpy() if v.ndim == 4 else v.numpy()
    tensors = {k: nhwc(v.detach()) for k, v in t.items()}
    grads = {k: {"weight": nhwc(tw.grad) if tw.ndim == 4 else tw.grad.numpy(), "bias": tb.grad.numpy()}
             for k, (tw, tb) in leaves.items()}
    return tensors, grads, nhwc(tx.grad), float(loss.detach())


def rel_err(ours: np.ndarray, ref: np.ndarray) -> float:
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    scale = float(np.abs(ref).max())
    return float(np.abs(ours - ref).max()) / scale if scale > 0 else float(np.abs(ours).max())


# ---------------------------------------------------------------- random graphs


def init(graph: Graph, seed: int) -> Graph:
    """He-normal weights and small random biases.

    NOTE: zero biases would put exact zeros before activations (padding, dead
    relu inputs), where relu has a kink and finite differences disagree.
    """
    zoo.he_init(graph, seed)
    rng = np.random.default_rng(seed + 1)
    for n in graph.parametric():
        n.params["bias"] = (rng.standard_normal(n.params["bias"].shape) * 0.1).astype(np.float32)
    return graph


def random_graph(seed: int) -> Graph:
    """A chain of random blocks over an NHWC input, ending in linear layers.

    Blocks: conv (any kernel/stride/padding/groups/act), standalone relu/relu6,
    max/avg pooling, residual (same-shape conv + add). See `init` for the weights.
    """
    rng = np.random.default_rng(seed)
    h, w, c = int(rng.integers(6, 11)), int(rng.integers(6, 11)), int(rng.choice([1, 2, 3, 4]))
    shapes = {INPUT: (h, w, c)}
    nodes, x = [], INPUT

    def push(node):
        nonlocal x
        nodes.append(node)
        shapes[node.name] = Graph(shapes[INPUT], list(nodes)).shape(node.name)
        x = node.name

    for i in range(int(rng.integers(2, 6))):
        h, w, c = shapes[x]
        kind = rng.choice(["conv", "conv", "conv", "act", "pool", "residual"])
        act = str(rng.choice(["none", "relu", "relu6"]))
        if kind == "conv":
            kh, kw = int(rng.integers(1, min(h, 3) + 1)), int(rng.integers(1, min(w, 3) + 1))
            groups_kind = rng.choice(["one", "depthwise", "grouped"])
            if groups_kind == "depthwise" and c > 1:
                groups, out = c, c * int(rng.choice([1, 2]))
            elif groups_kind == "grouped" and c % 2 == 0 and c > 2:
                groups, out = 2, 2 * int(rng.integers(1, 4))
            else:
                groups, out = 1, int(rng.integers(2, 7))
            pad = tuple(int(p) for p in rng.integers(0, [kh, kh, kw, kw]))
            stride = (int(rng.choice([1, 2])), int(rng.choice([1, 2])))
            push(conv2d(f"conv{i}", x, out, (kh, kw), stride, pad, groups, act, in_channels=c))
        elif kind == "act":
            push((relu if act == "relu" else relu6)(f"act{i}", x))
        elif kind == "pool" and min(h, w) >= 2:
            k = int(rng.choice([2, 3])) if min(h, w) >= 3 else 2
            s = int(rng.choice([1, 2]))
            push((maxpool if rng.random() < 0.5 else avgpool)(f"pool{i}", x, k, s))
        elif kind == "residual":
            block_in = x
            groups = c if rng.random() < 0.5 else 1
            push(conv2d(f"res{i}", x, c, 3, 1, 1, groups, str(rng.choice(["none", "relu"])), in_channels=c))
            push(g_add(f"add{i}", block_in, x, act))
    if rng.random() < 0.5:
        push(global_avgpool("gap", x))
    push(flatten("flat", x))
    push(linear("fc1", x, int(rng.integers(4, 9)), str(rng.choice(["none", "relu", "relu6"])),
                in_features=shapes[x][0]))
    push(linear("fc2", x, 5, in_features=shapes[x][0]))
    return init(Graph(shapes[INPUT], nodes, f"random{seed}"), seed)


def every_op_graph() -> Graph:
    """One small graph with every op and conv variant, so coverage does not depend on luck."""
    nodes = [
        conv2d("c_s2", INPUT, 4, 3, stride=2, padding=(1, 0, 1, 0), act="relu6", in_channels=3),
        conv2d("dw", "c_s2", 4, 3, padding=1, groups=4, act="relu", in_channels=4),
        conv2d("dw_m2", "dw", 8, (3, 2), stride=(1, 2), padding=(1, 1, 0, 1), groups=4, in_channels=4),
        relu6("r6", "dw_m2"),
        conv2d("grp", "r6", 8, 3, padding=1, groups=2, in_channels=8),
        g_add("add", "r6", "grp", act="relu"),
        maxpool("mp", "add", 2, 1),
        conv2d("pw", "mp", 6, 1, in_channels=8),
        relu("r", "pw"),
        avgpool("ap", "r", 2, 1),
        global_avgpool("gap", "ap"),
        flatten("flat", "gap"),
        linear("fc1", "flat", 7, act="relu", in_features=6),
        linear("fc2", "fc1", 5, in_features=7),
    ]
    return init(Graph((12, 12, 3), nodes, "every-op"), 3)


SEEDS = range(12)


def _features(g: Graph) -> set[str]:
    f = {n.op.value for n in g.nodes} | {f"act:{n.act}" for n in g.nodes}
    for n in g.nodes:
        if n.op == Op.CONV2D:
            cin = n.params["weight"].shape[3] * n.attrs["groups"]
            f.add("stride2" if max(n.attrs["stride"]) > 1 else "stride1")
            f.add("padded" if any(n.attrs["padding"]) else "unpadded")
            f.add("groups1" if n.attrs["groups"] == 1 else
                  "depthwise" if n.attrs["groups"] == cin else "grouped")
    return f


def test_random_graphs_cover_every_op_and_variant():
    seen = set().union(*(_features(random_graph(s)) for s in SEEDS))
    wanted = {op.value for op in fe.RULES} | {"act:relu", "act:relu6", "stride1", "stride2", "padded",
                                              "unpadded", "groups1", "depthwise", "grouped"}
    assert wanted <= seen, wanted - seen
    assert wanted <= _features(every_op_graph())


# ---------------------------------------------------------------- against torch


def _batch(graph: Graph, seed: int, b: int = 3, scale: float = 3.0):
    rng = np.random.default_rng(seed + 100)
    x = (rng.standard_normal((b, *graph.input_shape)) * scale).astype(np.float32)
    return x, rng.integers(0, graph.num_classes, b)


def check_against_torch(graph: Graph, x: np.ndarray, labels: np.ndarray) -> None:
    acts = fe.run(graph, x)
    loss, dlogits = fe.softmax_cross_entropy(acts[graph.output], labels)
    grads, dx = fe.backward(graph, acts, dlogits)
    t_acts, t_grads, t_dx, t_loss = torch_twin(graph, x, labels)
    for name, ref in t_acts.items():
        assert acts[name].dtype == np.float32
        assert rel_err(acts[name], ref) <= FWD_TOL, f"forward of {name}"
    assert loss == pytest.approx(t_loss, rel=FWD_TOL * 10)
    assert set(grads) == set(t_grads)
    for name, pair in t_grads.items():
        for key, ref in pair.items():
            assert grads[name][key].dtype == np.float32
            assert rel_err(grads[name][key], ref) <= BWD_TOL, f"d{key} of {name}"
    assert rel_err(dx, t_dx) <= BWD_TOL, "d input"


@pytest.mark.parametrize("seed", SEEDS)
def test_random_graph_matches_torch(seed):
    g = random_graph(seed)
    check_against_torch(g, *_batch(g, seed))


def test_every_op_graph_matches_torch():
    g = every_op_graph()
    check_against_torch(g, *_batch(g, 0, b=4))


@pytest.mark.parametrize("arch,shape", [("digits-cnn", None), ("small-cnn", None),
                                        ("mnist1d-cnn", None), ("mcunet-5fps", (32, 32, 3))])
def test_zoo_models_match_torch(arch, shape):
    g = zoo.build(arch, 10, shape, seed=1)
    check_against_torch(g, *_batch(g, 1, b=2, scale=1.0))


def test_maxpool_ties_send_the_gradient_to_the_first_max_like_torch():
    g = Graph((4, 4, 1), [maxpool("mp", INPUT, 2), flatten("f", "mp"),
                          linear("fc", "f", 3, in_features=4)])
    zoo.he_init(g, 0)
    x = np.ones((2, 4, 4, 1), np.float32)
    x[1, 0, 1, 0] = x[1, 1, 0, 0] = 2.0          # a tie between taps 1 and 2 of one window
    labels = np.array([0, 1])
    acts = fe.run(g, x)
    _, dx = fe.backward(g, acts, fe.softmax_cross_entropy(acts["fc"], labels)[1])
    _, _, t_dx, _ = torch_twin(g, x, labels)
    np.testing.assert_allclose(dx, t_dx, rtol=1e-6, atol=1e-7)
    assert dx[0, 0, 0, 0] != 0 and dx[0, 0, 1, 0] == 0   # all equal: the first tap
    assert dx[1, 0, 1, 0] != 0 and dx[1, 1, 0, 0] == 0   # tie: the first of the maxima


# ---------------------------------------------------------------- finite differences


def _loss64(graph: Graph, x: np.ndarray, labels: np.ndarray) -> float:
    return fe.softmax_cross_entropy(fe.run(graph, x, save=False, dtype=np.float64)[graph.output], labels)[0]


@pytest.mark.parametrize("seed", [*SEEDS, "every-op"])
def test_gradients_match_finite_differences(seed):
    """Directional derivatives along random directions, central differences in float64."""
    g = every_op_graph() if seed == "every-op" else random_graph(seed)
    for n in g.parametric():
        n.params = {k: v.astype(np.float64) for k, v in n.params.items()}
    x, labels = _batch(g, 7)
    x = x.astype(np.float64)
    acts = fe.run(g, x, dtype=np.float64)
    grads, dx = fe.backward(g, acts, fe.softmax_cross_entropy(acts[g.output], labels)[1])
    rng = np.random.default_rng(11)
    eps = 1e-6
    targets = [(None, "input")] + [(n, k) for n in g.parametric() for k in ("weight", "bias")]
    for node, key in targets:
        base = x if node is None else node.params[key]
        d = rng.standard_normal(base.shape)
        analytic = float(np.sum((dx if node is None else grads[node.name][key]) * d))

        def at(t, node=node, key=key, base=base, d=d):
            moved = base + t * d
            if node is None:
                return _loss64(g, moved, labels)
            node.params[key] = moved
            try:
                return _loss64(g, x, labels)
            finally:
                node.params[key] = base

        numeric = (at(eps) - at(-eps)) / (2 * eps)
        assert abs(numeric - analytic) <= FD_TOL * max(1.0, abs(analytic)), \
            f"{'input' if node is None else node.name}.{key}: numeric {numeric} vs analytic {analytic}"


# ---------------------------------------------------------------- API details


def test_trainable_subset_and_no_input_grad_give_the_same_gradients():
    g = every_op_graph()
    x, labels = _batch(g, 5)
    acts = fe.run(g, x)
    dl = fe.softmax_cross_entropy(acts[g.output], labels)[1]
    full, _ = fe.backward(g, acts, dl)
    part, dx = fe.backward(g, acts, dl, trainable=["grp", "fc2"], input_grad=False)
    assert dx is None
    assert set(part) == {"grp", "fc2"}
    for name in part:
        for key in ("weight", "bias"):
            np.testing.assert_array_equal(part[name][key], full[name][key])


def test_backward_without_saved_values_recomputes_them():
    g = every_op_graph()
    x, labels = _batch(g, 6)
    saved, bare = fe.run(g, x), fe.run(g, x, save=False)
    dl = fe.softmax_cross_entropy(saved[g.output], labels)[1]
    a, dxa = fe.backward(g, saved, dl)
    b, dxb = fe.backward(g, bare, dl)
    np.testing.assert_array_equal(dxa, dxb)
    for name in a:
        np.testing.assert_array_equal(a[name]["weight"], b[name]["weight"])


def test_forward_returns_logits_and_checks_the_input_shape():
    g = zoo.build("digits-cnn", 10, seed=0)
    x = np.random.default_rng(0).random((5, 8, 8, 1))
    logits = fe.forward(g, x)
    assert logits.shape == (5, 10) and logits.dtype == np.float32
    np.testing.assert_array_equal(logits, fe.run(g, x)["fc"])
    with pytest.raises(ValueError, match=r"expects \(8, 8, 1\)"):
        fe.forward(g, np.zeros((5, 8, 8)))


def test_softmax_cross_entropy_values_and_errors():
    logits = np.array([[0.0, 0.0], [1000.0, 0.0]], np.float32)   # the second must not overflow
    loss, grad = fe.softmax_cross_entropy(logits, np.array([0, 1]))
    assert loss == pytest.approx((np.log(2) + 1000.0) / 2, rel=1e-6)
    np.testing.assert_allclose(grad, [[-0.25, 0.25], [0.5, -0.5]], atol=1e-7)
    with pytest.raises(ValueError, match="labels must lie"):
        fe.softmax_cross_entropy(logits, np.array([0, 2]))
    with pytest.raises(ValueError, match=r"logits \(B, K\)"):
        fe.softmax_cross_entropy(logits[0], np.array([0]))


def test_unknown_trainable_name_is_refused():
    g = zoo.build("digits-cnn")
    acts = fe.run(g, np.zeros((1, 8, 8, 1)))
    with pytest.raises(ValueError, match="not conv2d/linear"):
        fe.backward(g, acts, np.zeros((1, 10)), trainable=["flatten"])
