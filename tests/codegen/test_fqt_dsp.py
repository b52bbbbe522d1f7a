"""The DSP paths of the FQT training kernels (emulated on the host, ASan + UBSan) give the reference
paths' results: whole generated FQT steps equal the simulator's after every step on graphs whose
shapes reach every tail of the blocked loops (odd channel and position counts, C/groups not a
multiple of 4, inputs not a multiple of 4 in the linear layers, strides and padding, odd output
channel counts in the transposed conv, im2col chunks of the conv weight gradient, max-pool words)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import needs_gcc
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.emit_fqt import quantize_input, state_arrays
from mcutrain.codegen.library import export_training_library
from mcutrain.mcu.hostbuild import build_host_train
from mcutrain.mcu.hostrun import run_host_train
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig


def odd_graph() -> G.Graph:
    """7x7x3 input; conv 5 ch (C = 3), maxpool, conv 3 ch over 5 (stride (2, 1), asymmetric
    padding), linear 9 -> 7 -> 3."""
    nodes = [G.conv2d("conv1", G.INPUT, 5, 3, padding=1, act="relu", in_channels=3),
             G.maxpool("pool", "conv1", 2),
             G.conv2d("conv2", "pool", 3, 3, stride=(2, 1), padding=(1, 0, 1, 1), act="relu6", in_channels=5),
             G.flatten("flat", "conv2"),
             G.linear("fc1", "flat", 7, act="relu", in_features=1 * 3 * 3),
             G.linear("fc2", "fc1", 3, in_features=7)]
    return zoo.he_init(G.Graph((7, 7, 3), nodes, "fqt-odd"), seed=4)


def wide_graph() -> G.Graph:
    """C = 8 (whole-word im2col), 9x5 positions (odd count), linear 180 -> 6 (in % 4 == 0)."""
    nodes = [G.conv2d("conv1", G.INPUT, 8, 3, padding=1, act="relu", in_channels=1),
             G.conv2d("conv2", "conv1", 4, 3, padding=1, act="relu", in_channels=8),
             G.flatten("flat", "conv2"),
             G.linear("fc", "flat", 6, in_features=9 * 5 * 4)]
    return zoo.he_init(G.Graph((9, 5, 1), nodes, "fqt-wide"), seed=6)


def pool_graph() -> G.Graph:
    """Max-pool over C = 8 (four channels per word), a conv of 68 input channels (the weight
    gradient's im2col in two chunks: 64 + 4) into O = 7 (transposed conv: two pairs of output
    channels per loop turn, then a single pair, then the odd last channel)."""
    nodes = [G.conv2d("conv1", G.INPUT, 8, 3, padding=1, act="relu", in_channels=1),
             G.maxpool("pool", "conv1", 2),
             G.conv2d("conv2", "pool", 68, 1, act="relu", in_channels=8),
             G.conv2d("conv3", "conv2", 7, 3, padding=1, act="relu", in_channels=68),
             G.flatten("flat", "conv3"),
             G.linear("fc", "flat", 4, in_features=3 * 3 * 7)]
    return zoo.he_init(G.Graph((6, 6, 1), nodes, "fqt-pool"), seed=8)


@needs_gcc
@pytest.mark.parametrize("graph", [odd_graph, wide_graph, pool_graph])
def test_dsp_steps_equal_the_simulator(tmp_path, graph):
    g = graph()
    rng = np.random.default_rng(1)
    steps = 3
    x = rng.random((8 + steps, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, g.num_classes, 8 + steps)

    def new() -> FQT:
        return FQT(g, FQTConfig(precision="int8", trainable="all", seed=7), x[:8])

    m = new()
    res = export_training_library(m, tmp_path / "lib", batch=1, kernels="dsp")
    exe = build_host_train(tmp_path / "lib", tmp_path / "train", kernels="dsp")
    xs, ys = [x[8 + s:9 + s] for s in range(steps)], [y[8 + s:9 + s] for s in range(steps)]
    results = run_host_train(exe, [(quantize_input(m, a), b) for a, b in zip(xs, ys)], 0.05, res.model,
                             g.num_classes)
    sim = new()
    w0 = {k: v.copy() for k, v in sim.w.items()}
    for s, r in enumerate(results):
        logits, losses = sim.logits_and_losses(xs[s], ys[s])
        np.testing.assert_array_equal(r.logits, logits.astype(np.int8), err_msg=f"step {s} logits")
        np.testing.assert_array_equal(r.losses, losses, err_msg=f"step {s} losses")
        sim.step(xs[s], ys[s], 0.05)
        for name, want in state_arrays(sim, res.model).items():
            np.testing.assert_array_equal(r.state[name], want, err_msg=f"step {s} {name}")
        assert r.state["rng"] == sim.rng.state
    assert all(int(np.sum(sim.w[k] != w0[k])) > 0 for k in sim.trainable)   # the weights really moved
