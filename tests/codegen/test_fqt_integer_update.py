"""The generated FQT int8 library with the integer-only update (`FQTConfig(update="integer")`,
`mt_fqt_upd_s8_int`) on the host (gcc, ASan + UBSan): after every step its losses, logits and every
entry of its saved state equal the simulated `FQT`'s (docs/integer-semantics.md 13.9)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import needs_gcc
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.emit_fqt import emit_fqt_training, quantize_input, reported_logits, state_arrays
from mcutrain.codegen.library import export_training_library
from mcutrain.mcu.hostbuild import build_host_train
from mcutrain.mcu.hostrun import run_host_train
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig


def small_graph() -> G.Graph:
    """conv(relu) -> maxpool 2x2 -> conv(relu6, stride 2) -> flatten -> linear on 8x8x1."""
    nodes = [G.conv2d("conv1", G.INPUT, 4, 3, padding=1, act="relu", in_channels=1),
             G.maxpool("pool", "conv1", 2),
             G.conv2d("conv2", "pool", 6, 3, stride=2, padding=1, act="relu6", in_channels=4),
             G.flatten("flat", "conv2"),
             G.linear("fc", "flat", 5, in_features=2 * 2 * 6)]
    return zoo.he_init(G.Graph((8, 8, 1), nodes, "fqt-int-upd"), seed=3)


def make(steps: int, bsz: int, lambda_min: float):
    rng = np.random.default_rng(0)
    g = small_graph()
    x = rng.random((8 + bsz * steps, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, g.num_classes, 8 + bsz * steps)
    cfg = FQTConfig(precision="int8", seed=5, lambda_min=lambda_min, partial_output=lambda_min < 1,
                    update="integer")
    return (lambda: FQT(g, cfg, x[:8])), x[8:], y[8:]


def test_the_integer_update_emits_its_kernel():
    new, _, _ = make(1, 1, 1.0)
    src = emit_fqt_training(new(), kernels="ref").source
    assert "mt_fqt_upd_s8_int(" in src and "mt_fqt_upd_s8(" not in src


@needs_gcc
@pytest.mark.parametrize(("bsz", "lambda_min"), [(1, 0.1), (3, 1.0)])
def test_c_steps_equal_the_simulator(tmp_path, bsz, lambda_min):
    """Partial updates at batch 1 (rows not updated draw nothing) and a batch of 3 (larger sums)."""
    steps, lr = 4, 0.05
    new, x, y = make(steps, bsz, lambda_min)
    m = new()
    src = export_training_library(m, tmp_path / "lib", batch=bsz, kernels="ref").model
    exe = build_host_train(tmp_path / "lib", tmp_path / "train", kernels="ref")
    xs = [x[i * bsz:(i + 1) * bsz] for i in range(steps)]
    ys = [y[i * bsz:(i + 1) * bsz] for i in range(steps)]
    results = run_host_train(exe, [(quantize_input(m, a), b) for a, b in zip(xs, ys)], lr, src,
                             m.graph.num_classes)
    sim = new()
    w0 = {k: v.copy() for k, v in sim.w.items()}
    for s, r in enumerate(results):
        logits, losses = sim.logits_and_losses(xs[s], ys[s])
        np.testing.assert_array_equal(r.logits, reported_logits(sim, logits), err_msg=f"step {s} logits")
        np.testing.assert_array_equal(r.losses, losses, err_msg=f"step {s} losses")
        sim.step(xs[s], ys[s], lr)
        for name, want in state_arrays(sim, src).items():
            np.testing.assert_array_equal(r.state[name], want, err_msg=f"step {s} {name}")
    for layer in sim.trainable:      # the equality is not that of untouched weights
        assert np.sum(sim.w[layer] != w0[layer]) > 0, layer
