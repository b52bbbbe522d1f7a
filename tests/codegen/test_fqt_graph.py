"""Generated FQT int8 libraries on non-sequential graphs (host gcc, ASan + UBSan): depthwise and
grouped convs, residual adds (a tensor read by two ops sums their errors), average and global
average pools, standalone relus. After every step the C library's logits, losses and every state
entry equal the simulated `FQT`'s, on seeded random graphs and on MCUNet-5FPS at a reduced input
size with its last two blocks trained."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import needs_gcc
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.emit import ExportError
from mcutrain.codegen.emit_fqt import emit_fqt_training, quantize_input, reported_logits, state_arrays
from mcutrain.codegen.library import export_training_library
from mcutrain.graph import Op
from mcutrain.mcu.hostbuild import build_host_train
from mcutrain.mcu.hostrun import run_host_train
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig


def random_graph(seed: int) -> G.Graph:
    """A seeded MobileNetV2-like graph: stem, inverted-residual blocks (1x1 expand, depthwise or grouped
    kxk, 1x1 project, residual add when shapes match, sometimes with a fused relu), an optional tiled
    average pool with a standalone relu after it, global average pool, flatten, linear."""
    r = np.random.default_rng(seed)
    side = h = int(r.choice([6, 7, 8]))
    c = int(r.choice([3, 4]))
    nodes = [G.conv2d("stem", G.INPUT, c, 3, padding=1, act="relu6", in_channels=2)]
    x = "stem"
    for b in range(int(r.integers(2, 4))):
        e = c * int(r.choice([2, 3]))
        k = int(r.choice([3, 5]))
        stride = 2 if b == 1 else 1
        groups = e if r.random() < 0.7 else e // 2      # depthwise, or two channels per group
        out = c if stride == 1 and r.random() < 0.8 else c + 2
        nodes += [G.conv2d(f"b{b}.pw1", x, e, 1, act="relu6", in_channels=c),
                  G.conv2d(f"b{b}.dw", f"b{b}.pw1", e, k, stride=stride, padding=k // 2, groups=groups,
                           act="relu6", in_channels=e),
                  G.conv2d(f"b{b}.pw2", f"b{b}.dw", out, 1, in_channels=e)]
        h = (h + 2 * (k // 2) - k) // stride + 1
        if out == c:
            nodes.append(G.add(f"b{b}.add", f"b{b}.pw2", x, act=str(r.choice(["none", "relu"]))))
            x = f"b{b}.add"
        else:
            x = f"b{b}.pw2"
        c = out
    if h % 2 == 0 and r.random() < 0.7:
        nodes += [G.avgpool("ap", x, 2), G.relu("ap.relu", "ap")]
        x = "ap.relu"
    nodes += [G.global_avgpool("gap", x), G.flatten("flat", "gap"), G.linear("fc", "flat", 5, in_features=c)]
    return zoo.he_init(G.Graph((side, side, 2), nodes, f"rand{seed}"), seed=seed)


def run_and_compare(tmp_path, g: G.Graph, cfg: FQTConfig, steps: int, batch: int, lr: float = 0.05,
                    calib: int = 8) -> FQT:
    """Export, build on the host, run `steps` steps in C and in the simulator; every value equal."""
    rng = np.random.default_rng(0)
    x = rng.random((calib + batch * steps, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, g.num_classes, calib + batch * steps)
    m = FQT(g, cfg, x[:calib])
    res = export_training_library(m, tmp_path / "lib", batch=batch, kernels="ref")
    exe = build_host_train(tmp_path / "lib", tmp_path / "train", kernels="ref")
    xs = [x[calib + i * batch:calib + (i + 1) * batch] for i in range(steps)]
    ys = [y[calib + i * batch:calib + (i + 1) * batch] for i in range(steps)]
    results = run_host_train(exe, [(quantize_input(m, a), b) for a, b in zip(xs, ys)], lr, res.model,
                             g.num_classes)
    sim = FQT(g, cfg, x[:calib])
    w0 = {k: v.copy() for k, v in sim.w.items()}
    for s, r in enumerate(results):
        logits, losses = sim.logits_and_losses(xs[s], ys[s])
        np.testing.assert_array_equal(r.logits, reported_logits(sim, logits), err_msg=f"step {s} logits")
        np.testing.assert_array_equal(r.losses, losses, err_msg=f"step {s} losses")
        sim.step(xs[s], ys[s], lr)
        for name, want in state_arrays(sim, res.model).items():
            np.testing.assert_array_equal(r.state[name], want, err_msg=f"step {s} {name}")
        if "rng" in r.state:              # the stochastic rounding stream (int8)
            assert r.state["rng"] == sim.rng.state, f"step {s} RNG state"
    for layer in sim.trainable:           # the equality is not that of untouched weights
        assert np.any(sim.w[layer] != w0[layer]), layer
    return sim


@needs_gcc
@pytest.mark.parametrize(("seed", "trainable", "batch"), [(1, "all", 1), (4, "all", 2), (2, "last:4", 1)])
def test_random_graphs_train_bit_exactly_in_c(tmp_path, seed, trainable, batch):
    """Seed 1: two residual adds (one with a fused relu), avgpool + standalone relu; seed 4: batch 2
    (the error ranges of the whole batch seed on the first step), a grouped conv; seed 2: a partial
    backward that stops inside the graph."""
    g = random_graph(seed)
    sim = run_and_compare(tmp_path, g, FQTConfig(precision="int8", trainable=trainable, seed=5), steps=3,
                          batch=batch)
    ops = {n.op for n in sim.graph.nodes if sim.needs[n.name]}
    assert {Op.ADD, Op.GLOBAL_AVGPOOL} <= ops or trainable != "all"
    assert any(n.op == Op.CONV2D and n.attrs["groups"] > 1 and n.name in sim.trainable
               for n in sim.graph.nodes)


@needs_gcc
@pytest.mark.parametrize("batch", [1, 4])
def test_partial_layers_before_residual_adds_train_bit_exactly_in_c(tmp_path, batch):
    """Partial updates of every trained layer on seed 1's graph: b0.pw2 and b2.pw2 feed residual adds
    (one with a fused relu), so their top-k masks a copy of the add's error and the skip branch reads
    it unmasked; b2's copy is of the relu-masked error."""
    g = random_graph(1)
    sim = run_and_compare(tmp_path, g, FQTConfig(precision="int8", lambda_min=0.3, seed=5), steps=3,
                          batch=batch)
    s = emit_fqt_training(sim, batch=batch).plan.schedule
    assert [k.node for k in s.kernels if k.op == "error_copy"] == ["b2.pw2", "b0.pw2"]


@needs_gcc
def test_parallel_branches_into_an_add_mask_one_copy_in_c(tmp_path):
    """An add of two parallel convs, both partial: the backward pass reaches `right` first, which masks
    a copy; `left` is the add's error's last reader and masks it in place."""
    nodes = [G.conv2d("stem", G.INPUT, 4, 3, padding=1, act="relu6", in_channels=2),
             G.conv2d("left", "stem", 6, 3, padding=1, in_channels=4),
             G.conv2d("right", "stem", 6, 1, in_channels=4), G.add("sum", "left", "right", act="relu"),
             G.global_avgpool("gap", "sum"), G.flatten("flat", "gap"),
             G.linear("fc", "flat", 5, in_features=6)]
    g = zoo.he_init(G.Graph((5, 5, 2), nodes, "fork"), seed=3)
    sim = run_and_compare(tmp_path, g, FQTConfig(precision="int8", lambda_min=0.3, seed=5), steps=3, batch=1)
    s = emit_fqt_training(sim, batch=1).plan.schedule
    assert [k.node for k in s.kernels if k.op == "error_copy"] == ["right"]


@needs_gcc
def test_mcunet_last_two_blocks_train_bit_exactly_in_c(tmp_path):
    """MCUNet-5FPS at 32x32 (the 128x128 network's layers, 1/16 of its positions), its last two
    blocks and the head trained (`last:7`, as bench mcu): the error crosses block 12's residual
    add, the depthwise convs and a 1x1 conv with 576 output channels (int64-flushed sums)."""
    g = zoo.build("mcunet-5fps", num_classes=10, input_shape=(32, 32, 3), seed=0)
    sim = run_and_compare(tmp_path, g, FQTConfig(precision="int8", trainable="last:7", seed=5), steps=2,
                          batch=1, calib=4)
    assert sim.trainable == ["blocks.12.pw1", "blocks.12.dw", "blocks.12.pw2", "blocks.13.pw1",
                             "blocks.13.dw", "blocks.13.pw2", "head"]


def _refused(g: G.Graph, msg: str, batch: int = 1, **kw) -> None:
    x = np.random.default_rng(0).random((4, *g.input_shape), dtype=np.float32)
    with pytest.raises(ExportError, match=msg):
        emit_fqt_training(FQT(g, FQTConfig(**kw), x), batch=batch)


def test_unsupported_graphs_are_refused_with_what_to_do():
    g = random_graph(1)
    _refused(g, r"uint8 .*--precision int8", precision="uint8")
    nodes = [G.conv2d("c", G.INPUT, 4, 3, padding=1, act="relu", in_channels=1),
             G.avgpool("ap", "c", 3, 1), G.flatten("f", "ap"), G.linear("fc", "f", 3, in_features=4 * 4 * 4)]
    _refused(zoo.he_init(G.Graph((6, 6, 1), nodes, "ov"), seed=1), "overlapping average-pool windows")
    nodes = [G.conv2d("c", G.INPUT, 2, 3, padding=1, act="relu", in_channels=1), G.flatten("f", "c"),
             G.linear("fa", "f", 8, in_features=18), G.linear("fb", "f", 8, in_features=18),
             G.add("s", "fa", "fb"), G.linear("fc", "s", 3, in_features=8)]
    _refused(zoo.he_init(G.Graph((3, 3, 1), nodes, "two"), seed=1), "feeds several ops and the linear")
