"""Partial updates in C do only the kept work (mt_fqt_keep.h) and stay bit-exact with the simulator.

From a state where partial updates prune (a few simulated steps in, so the largest loss seen is an
earlier sample's), generated int8 steps equal the simulator after every step with the reference
loops and with the DSP loops (emulated on the host: ASan + UBSan), on graphs whose kept counts hit
the tails (odd counts, strides, O not a multiple of 4); on an emulated Cortex-M4 the native DSP
step is bit-exact and a step that keeps one structure per layer costs clearly fewer instructions
than the full step from the same state.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_fqt_dsp import odd_graph, pool_graph, wide_graph

from conftest import needs_gcc
from mcutrain import zoo
from mcutrain.codegen.emit_fqt import quantize_input, reported_logits, state_arrays
from mcutrain.codegen.library import export_training_library
from mcutrain.mcu.hostbuild import build_host_train
from mcutrain.mcu.hostrun import run_host_train
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig

LR = 0.05


def warmed(g, lambda_min: float, warm: int, steps: int, seed: int = 1, lambda_max: float = 1.0,
           precision: str = "int8"):
    """(new method at the warm-up's state, measured samples): `warm` simulated partial steps first."""
    rng = np.random.default_rng(seed)
    x = rng.random((8 + warm + steps, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, g.num_classes, 8 + warm + steps)
    base = {"precision": precision, "trainable": "all", "seed": 7,
            "exact_float_order": precision == "float32"}
    m = FQT(g, FQTConfig(**base, lambda_min=0.1), x[:8])
    for i in range(8, 8 + warm):
        m.step(x[i:i + 1], y[i:i + 1], LR)
    state = m.state()

    def new() -> FQT:
        f = FQT(g, FQTConfig(**base, lambda_min=lambda_min, lambda_max=lambda_max), x[:8])
        f.load_state(*state)
        return f
    return new, [(x[i:i + 1], y[i:i + 1]) for i in range(8 + warm, 8 + warm + steps)]


def check_steps(results, new, batches, src) -> list[int]:
    """Every step's logits, losses and state equal the simulator's; returns its weight-gradient MACs."""
    sim, macs = new(), []
    for s, (r, (x, y)) in enumerate(zip(results, batches)):
        logits, losses = sim.logits_and_losses(x, y)
        np.testing.assert_array_equal(r.logits, reported_logits(sim, logits), err_msg=f"step {s} logits")
        np.testing.assert_array_equal(r.losses, losses, err_msg=f"step {s} losses")
        macs.append(sim.step(x, y, LR).macs["weight_grad"])
        for name, want in state_arrays(sim, src).items():
            np.testing.assert_array_equal(r.state[name], want, err_msg=f"step {s} {name}")
        assert r.state["rng"] == sim.rng.state
    return macs


@needs_gcc
@pytest.mark.parametrize(("graph", "kernels", "precision"), [
    (odd_graph, "dsp", "int8"), (pool_graph, "dsp", "int8"), (wide_graph, "ref", "int8"),
    (odd_graph, "ref", "uint8"), (odd_graph, "ref", "float32")])
def test_partial_steps_from_a_trained_state_equal_the_simulator(tmp_path, graph, kernels, precision):
    g = graph()
    new, batches = warmed(g, 0.1, warm=6, steps=3, precision=precision)
    m = new()
    res = export_training_library(m, tmp_path / "lib", batch=1, kernels=kernels)
    source = (tmp_path / "lib" / "model.c").read_text()
    tag = {"int8": "s8_s8", "uint8": "u8", "float32": "f32"}[precision]
    assert f"mt_conv2d_bwd_w_{tag}_keep(" in source and "bwd_in_" in source and "_keep(" in source
    exe = build_host_train(tmp_path / "lib", tmp_path / "train", kernels=kernels)
    results = run_host_train(exe, [(quantize_input(m, x), y) for x, y in batches], LR, res.model,
                             g.num_classes)
    macs = check_steps(results, new, batches, res.model)
    full = sum(g.macs(n) for n in g.parametric())
    assert min(macs) < full          # the kept sets really were partial


def _m4_step(tmp_path, new, batches, name: str):
    from mcutrain.codegen.cross import build_mcu_train, run_mcu_train

    m = new()
    res = export_training_library(m, tmp_path / name / "lib", batch=1, kernels="dsp")
    b = build_mcu_train(tmp_path / name / "lib", "cortex-m4", tmp_path / name / "t.elf", kernels="dsp")
    out, prof, _ = run_mcu_train(b.elf, "cortex-m4", [(quantize_input(m, x), y) for x, y in batches], LR,
                                 res.model, m.graph.num_classes, tmp_path / name / "run")
    return out, prof.region.total, res.model


def test_m4_partial_step_is_bit_exact_and_skips_the_pruned_work(arm_tools, tmp_path):
    """lambda_min = lambda_max = 0: one structure per layer (the output layer trains fully)."""
    g = zoo.build("digits-cnn", seed=1)
    full_new, batches = warmed(g, 1.0, warm=4, steps=2)
    part_new, _ = warmed(g, 0.0, warm=4, steps=2, lambda_max=0.0)
    full_out, full_instr, full_src = _m4_step(tmp_path, full_new, batches, "full")
    part_out, part_instr, part_src = _m4_step(tmp_path, part_new, batches, "partial")
    check_steps(full_out, full_new, batches, full_src)
    check_steps(part_out, part_new, batches, part_src)
    assert part_instr < 0.8 * full_instr, (part_instr, full_instr)   # 0.70 when written: the forward stays
