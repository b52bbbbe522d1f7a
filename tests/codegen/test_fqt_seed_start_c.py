"""Generated FQT libraries of the seed's precisions started from an int8 model (converted by
`methods/fqt_seed_start`) on the host (gcc): the C library starts from the converted state the
simulator holds -- the emitter reads the method's state, not the float graph -- and after every
step its losses, logits and every entry of its saved state equal the simulator's."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import needs_gcc
from mcutrain import zoo
from mcutrain.codegen.emit_fqt import quantize_input, reported_logits, state_arrays
from mcutrain.codegen.library import export_training_library
from mcutrain.engines import ptq
from mcutrain.mcu.hostbuild import build_host_train
from mcutrain.mcu.hostrun import run_host_train
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig

STEPS = 3


@needs_gcc
@pytest.mark.parametrize(("precision", "trainable"), [("uint8", "all"), ("mixed", "last:2"),
                                                      ("float32", "all")])
def test_c_steps_from_a_converted_int8_model_equal_the_simulator(tmp_path, precision, trainable):
    rng = np.random.default_rng(4)
    g = zoo.build("digits-cnn", seed=2)
    x = rng.random((8 + STEPS, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, g.num_classes, STEPS)
    qm = ptq.quantize_model(g, x[:8])
    cfg = FQTConfig(precision=precision, trainable=trainable, seed=5, exact_float_order=True)
    m = FQT(qm, cfg, x[:8])
    src = export_training_library(m, tmp_path / "lib", batch=1, kernels="ref").model
    exe = build_host_train(tmp_path / "lib", tmp_path / "train", kernels="ref")
    xs = [x[8 + s:9 + s] for s in range(STEPS)]
    ys = [y[s:s + 1] for s in range(STEPS)]
    results = run_host_train(exe, [(quantize_input(m, a), b) for a, b in zip(xs, ys, strict=True)], 0.05,
                             src, g.num_classes)
    sim = FQT(qm, cfg, 50 * x[:8])          # another calibration set: an int8 model needs none
    start = {k: v.copy() for k, v in sim.w.items()}
    for s, r in enumerate(results):
        logits, losses = sim.logits_and_losses(xs[s], ys[s])
        np.testing.assert_array_equal(r.logits, reported_logits(sim, logits), err_msg=f"step {s} logits")
        np.testing.assert_array_equal(r.losses, losses, err_msg=f"step {s} losses")
        sim.step(xs[s], ys[s], 0.05)
        for name, want in state_arrays(sim, src).items():
            np.testing.assert_array_equal(r.state[name], want, err_msg=f"step {s} {name}")
    assert any(not np.array_equal(sim.w[k], start[k]) for k in sim.trainable)
