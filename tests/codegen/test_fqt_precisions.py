"""Generated FQT libraries of precisions mixed and float32, and uint8 with a batch or partial updates,
on the host (gcc, ASan + UBSan): after every step the C library's losses, logits and every entry of
its saved state equal the simulated `FQT`'s, whose float32 sums run in the sequential order the C
kernels use (`exact_float_order`)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import needs_gcc
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.emit import ExportError
from mcutrain.codegen.emit_fqt import emit_fqt_training, quantize_input, reported_logits, state_arrays
from mcutrain.codegen.library import export_training_library
from mcutrain.mcu.hostbuild import build_host_train
from mcutrain.mcu.hostrun import run_host_train
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig


def pool_graph() -> G.Graph:
    """conv(relu6) -> maxpool 2x2 -> conv(relu, stride 2) -> flatten -> linear."""
    nodes = [G.conv2d("conv1", G.INPUT, 4, 3, padding=1, act="relu6", in_channels=1),
             G.maxpool("pool", "conv1", 2),
             G.conv2d("conv2", "pool", 6, 3, stride=2, padding=1, act="relu", in_channels=4),
             G.flatten("flat", "conv2"),
             G.linear("fc", "flat", 5, in_features=2 * 2 * 6)]
    return zoo.he_init(G.Graph((8, 8, 1), nodes, "fqt-pool"), seed=3)


def make(arch: str, steps: int, precision: str, bsz: int = 1, trainable: str = "all",
         lambda_min: float = 1.0):
    rng = np.random.default_rng(0)
    g = pool_graph() if arch == "pool" else zoo.build(arch, seed=1)
    x = rng.random((8 + bsz * steps, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, g.num_classes, 8 + bsz * steps)
    cfg = FQTConfig(precision=precision, trainable=trainable, seed=5, lambda_min=lambda_min,
                    partial_output=lambda_min < 1, exact_float_order=True)
    return (lambda: FQT(g, cfg, x[:8])), x[8:], y[8:]


def run_steps(tmp_path, arch: str, precision: str, steps: int, bsz: int = 1, trainable: str = "all",
              lambda_min: float = 1.0, kernels: str = "ref") -> int:
    """C steps against the simulator, entry by entry; returns the steps whose update was partial."""
    new, x, y = make(arch, steps, precision, bsz, trainable, lambda_min)
    m = new()
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
    full_wg, pruned = bsz * sum(sim.graph.macs(sim.graph.node(t)) for t in sim.trainable), 0
    for s, r in enumerate(results):
        logits, losses = sim.logits_and_losses(xs[s], ys[s])
        np.testing.assert_array_equal(r.logits, reported_logits(sim, logits), err_msg=f"step {s} logits")
        np.testing.assert_array_equal(r.losses, losses, err_msg=f"step {s} losses")
        stats = sim.step(xs[s], ys[s], lr)
        pruned += stats.macs["weight_grad"] < full_wg
        for name, want in state_arrays(sim, src).items():
            np.testing.assert_array_equal(r.state[name], want, err_msg=f"step {s} {name}")
        assert r.state["steps"] == s + 1
    for layer in sim.trainable:      # the equality is not that of untouched weights
        assert np.sum(sim.w[layer] != w0[layer]) > 0, layer
    return pruned


@needs_gcc
@pytest.mark.parametrize(("arch", "precision", "bsz", "trainable"), [
    ("pool", "mixed", 1, "all"), ("digits-cnn", "mixed", 1, "all"), ("pool", "mixed", 3, "last:2"),
    ("pool", "float32", 1, "all"), ("digits-cnn", "float32", 1, "all"), ("pool", "float32", 3, "all"),
    ("pool", "uint8", 3, "all"), ("digits-cnn", "uint8", 2, "last:2")])
def test_c_steps_equal_the_simulator(tmp_path, arch, precision, bsz, trainable):
    """mixed: uint8 forward, float32 errors and gradients; float32 throughout; uint8 with a batch:
    per-sample uint8 gradients summed in int16, error and gradient ranges of the whole batch on
    the first step (the seeding pass)."""
    run_steps(tmp_path, arch, precision, 3, bsz, trainable)


@needs_gcc
@pytest.mark.parametrize("precision", ["uint8", "mixed", "float32"])
def test_partial_updates_equal_the_simulator(tmp_path, precision):
    """lambda_min 0.1: top-k per layer on the device (the output layer too), masked updates."""
    assert run_steps(tmp_path, "pool", precision, 4, lambda_min=0.1) > 0


def test_float32_inputs_travel_as_bytes():
    new, x, _ = make("pool", 2, "float32")
    m = new()
    q = quantize_input(m, x[:2])
    assert q.dtype == np.int8 and q.shape == (2, 8 * 8 * 4)
    np.testing.assert_array_equal(q.view("<f4").reshape(x[:2].shape), x[:2])
    src = emit_fqt_training(m, batch=1, kernels="ref")
    assert "#define MODEL_INPUT_SIZE 256" in src.header


@pytest.mark.parametrize(("kw", "batch", "msg"), [
    ({"precision": "uint8"}, 200, "at most --batch 128"),
    ({"precision": "mixed", "weight_rounding": "floor"}, 1, "fqt mixed in C rounds weights to nearest"),
])
def test_unsupported_settings_are_refused(kw, batch, msg):
    g = zoo.build("digits-cnn", seed=1)
    x = np.random.default_rng(0).random((4, *g.input_shape), dtype=np.float32)
    with pytest.raises(ExportError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        emit_fqt_training(FQT(g, FQTConfig(**kw), x), batch=batch)


@pytest.mark.parametrize("precision", ["mixed", "float32"])
def test_windowed_average_pools_need_int8(precision):
    nodes = [G.conv2d("a", G.INPUT, 2, 3, padding=1, act="relu", in_channels=1),
             G.avgpool("ap", "a", 2),
             G.flatten("flat", "ap"), G.linear("fc", "flat", 3, in_features=2 * 2 * 2)]
    g = zoo.he_init(G.Graph((4, 4, 1), nodes, "ap"), seed=1)
    x = np.random.default_rng(0).random((4, 4, 4, 1), dtype=np.float32)
    msg = f"node 'ap': op avgpool has no fqt {precision} C step; .*--precision int8"
    with pytest.raises(ExportError, match=msg):
        emit_fqt_training(FQT(g, FQTConfig(precision=precision), x))
