"""Generated FQT int8 libraries on the host (gcc, ASan + UBSan): after every step the C library's
losses, logits and every entry of its saved state (weights, biases, weight scales and ranges,
activation and error ranges and qparams, standardization statistics, bias scales, RNG, step
counter) equal the simulated `FQT`'s; the arena is the planner's; unsupported settings are refused."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import needs_gcc
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.emit import ExportError
from mcutrain.codegen.emit_fqt import (
    emit_fqt_training,
    jump_columns,
    quantize_input,
    state_arrays,
)
from mcutrain.codegen.library import export_training_library
from mcutrain.mcu.hostbuild import build_host_train
from mcutrain.mcu.hostrun import run_host_train
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.plan.schedules import schedule_for
from mcutrain.plan.training import plan_training
from mcutrain.quant.rng import XorShift32


def pool_graph() -> G.Graph:
    """conv(relu6) -> maxpool 2x2 -> conv(relu, stride 2) -> flatten -> linear."""
    nodes = [G.conv2d("conv1", G.INPUT, 4, 3, padding=1, act="relu6", in_channels=1),
             G.maxpool("pool", "conv1", 2),
             G.conv2d("conv2", "pool", 6, 3, stride=2, padding=1, act="relu", in_channels=4),
             G.flatten("flat", "conv2"),
             G.linear("fc", "flat", 5, in_features=2 * 2 * 6)]
    return zoo.he_init(G.Graph((8, 8, 1), nodes, "fqt-pool"), seed=3)


def mlp_graph() -> G.Graph:
    """flatten -> linear(relu) -> linear on 20x30x1: 600 weights a row, over the uint8 update's
    per-code step table threshold (512), and ReLU-masked rows whose gradient is one code (sd 0)."""
    nodes = [G.flatten("flat", G.INPUT), G.linear("fc1", "flat", 8, in_features=600, act="relu"),
             G.linear("fc", "fc1", 5, in_features=8)]
    return zoo.he_init(G.Graph((20, 30, 1), nodes, "fqt-mlp"), seed=3)


def wide_graph() -> G.Graph:
    """36 and 34 channels (uint8 kernels sum 32 channels at a time: a full chunk and a tail) with a
    stride-2 conv over 36 input channels."""
    nodes = [G.conv2d("conv1", G.INPUT, 36, 3, padding=1, act="relu", in_channels=1),
             G.maxpool("pool", "conv1", 2),
             G.conv2d("conv2", "pool", 34, 3, stride=2, padding=1, act="relu", in_channels=36),
             G.flatten("flat", "conv2"),
             G.linear("fc", "flat", 5, in_features=2 * 2 * 34)]
    return zoo.he_init(G.Graph((8, 8, 1), nodes, "fqt-wide"), seed=3)


def make(arch: str, steps: int, trainable: str = "all", seed: int = 5, precision: str = "int8",
         lambda_min: float = 1.0):
    rng = np.random.default_rng(0)
    graphs = {"pool": pool_graph, "mlp": mlp_graph, "wide": wide_graph}
    g = graphs[arch]() if arch in graphs else zoo.build(arch, seed=1)
    x = rng.random((8 + 4 * steps, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, g.num_classes, 8 + 4 * steps)
    cfg = FQTConfig(precision=precision, trainable=trainable, seed=seed, lambda_min=lambda_min,
                    partial_output=lambda_min < 1)
    return (lambda: FQT(g, cfg, x[:8])), x[8:], y[8:]


@needs_gcc
@pytest.mark.parametrize(("arch", "trainable", "steps", "bsz", "precision", "lambda_min"), [
    ("digits-cnn", "all", 4, 1, "int8", 0.1), ("pool", "last:2", 3, 1, "int8", 1.0),
    ("pool", "all", 3, 3, "int8", 1.0), ("pool", "all", 3, 1, "uint8", 1.0),
    ("mlp", "all", 3, 1, "uint8", 1.0), ("wide", "all", 2, 1, "uint8", 1.0)])
def test_c_steps_equal_the_simulator(tmp_path, arch, trainable, steps, bsz, precision, lambda_min):
    """Batch 3: one sample at a time, gradients summed over the batch, error ranges of the whole
    batch on the first step (the seeding pass). uint8: seed A's format (per-sample uint8 gradients).
    lambda_min 0.1: partial updates chosen on the device (top-k per layer, the output layer too)."""
    new, x, y = make(arch, steps, trainable, precision=precision, lambda_min=lambda_min)
    m = new()
    kernels = "dsp" if arch == "digits-cnn" else "ref"   # dsp: the conv forward's im2col path (scratch)
    res = export_training_library(m, tmp_path / "lib", batch=bsz, kernels=kernels)
    src = res.model
    exe = build_host_train(tmp_path / "lib", tmp_path / "train", kernels=kernels)
    lr = 0.05
    xs = [x[i * bsz:(i + 1) * bsz] for i in range(steps)]
    ys = [y[i * bsz:(i + 1) * bsz] for i in range(steps)]
    results = run_host_train(exe, [(quantize_input(m, a), b) for a, b in zip(xs, ys)], lr, src,
                             m.graph.num_classes)
    sim = new()
    w0 = {k: v.copy() for k, v in sim.w.items()}
    full_wg, pruned_steps = bsz * sum(sim.graph.macs(sim.graph.node(t)) for t in sim.trainable), 0
    for s, r in enumerate(results):
        logits, losses = sim.logits_and_losses(xs[s], ys[s])
        np.testing.assert_array_equal(r.logits, logits.astype(np.int8), err_msg=f"step {s} logits")
        np.testing.assert_array_equal(r.losses, losses, err_msg=f"step {s} losses")
        stats = sim.step(xs[s], ys[s], lr)
        pruned_steps += stats.macs["weight_grad"] < full_wg
        for name, want in state_arrays(sim, src).items():
            np.testing.assert_array_equal(r.state[name], want, err_msg=f"step {s} {name}")
        assert r.state["rng"] == sim.rng.state, f"step {s} RNG state"
        assert r.state["steps"] == s + 1
    assert (pruned_steps > 0) == (lambda_min < 1)      # partial updates really pruned some steps
    changed = {k: int(np.sum(sim.w[k] != w0[k])) for k in w0}
    for layer in sim.trainable:           # the equality is not that of untouched weights
        assert changed[layer] > 0, changed
    frozen = [n for n in w0 if n not in sim.trainable]
    assert all(changed[n] == 0 for n in frozen)
    names = {e.name for e in src.state}
    assert {"err.fc.range", "act.fc.scale", "fc.norm_sd", "fc.bias_scale", "loss_max"} <= names


def test_arena_is_the_planners_and_the_state_layout_is_named():
    new, _, _ = make("digits-cnn", 1)
    m = new()
    src = emit_fqt_training(m, batch=1, kernels="ref")
    plan = plan_training(schedule_for(m, batch=1, kernels="ref"))
    assert src.arena_bytes == plan.arena_bytes
    for t, off in plan.offsets.items():
        assert f"(model_arena.bytes + {off})) /* {t}:" in src.source
    assert [e.name for e in src.state][:4] == ["act.input.range", "act.input.scale", "act.input.zero_point",
                                               "act.conv1.range"]
    assert src.state_bytes == 16 + sum(e.nbytes for e in src.state)


def test_jump_columns_advance_the_stream():
    cols = jump_columns(1000)
    s = 123456789
    out = 0
    for b in range(32):
        if (s >> b) & 1:
            out ^= int(cols[b])
    g = XorShift32(s)
    for _ in range(1000):
        g.next_u32()
    assert out == g.state


@pytest.mark.parametrize(("kw", "batch", "msg"), [
    ({"precision": "uint8", "weight_rounding": "floor"}, 1, "fqt uint8 in C rounds weights to nearest"),
])
def test_unsupported_settings_are_refused(kw, batch, msg):
    g = zoo.build("digits-cnn", seed=1)
    x = np.random.default_rng(0).random((4, *g.input_shape), dtype=np.float32)
    with pytest.raises(ExportError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        emit_fqt_training(FQT(g, FQTConfig(**kw), x), batch=batch)
