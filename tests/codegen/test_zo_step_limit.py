"""The ZO weight-step limit (`--max-step`) in generated C: bit-exact with the simulator on the host
(ASan + UBSan) and on an emulated Cortex-M4, in cases where the limit clamps real steps."""

from __future__ import annotations

import numpy as np
import pytest
from test_train_export import model_and_data, run_and_compare

from conftest import needs_gcc
from mcutrain.codegen.library import export_training_library
from mcutrain.engines import int_engine
from mcutrain.methods import zo_estimator as est
from mcutrain.methods.zo import ZOConfig, ZOMethod


def _make(perturb: str, max_step: int):
    return lambda qm: ZOMethod(qm, ZOConfig(queries=4, perturb=perturb, seed=5, max_step=max_step))


def _largest_unlimited_step(arch: str, perturb: str, lr: float, steps: int = 3) -> int:
    """The largest weight change of one step without the limit (so a test can show it clamps)."""
    qm, batches = model_and_data(arch, steps, 2)
    m = _make(perturb, 0)(qm)
    most = 0
    for x, y in batches:
        before = {n: m.qm.weights[n].astype(int) for n in m.layers}
        m.step(x, y, lr)
        most = max(most, *(int(np.abs(m.qm.weights[n] - before[n]).max()) for n in m.layers))
    return most


@needs_gcc
@pytest.mark.parametrize(("arch", "perturb", "lr"), [("tiny", "mix", 8.0), ("tiny", "np", 8.0),
                                                      ("digits-cnn", "mix", 0.5)])
def test_limited_zo_library_is_bit_exact_on_the_host(tmp_path, arch, perturb, lr):
    assert _largest_unlimited_step(arch, perturb, lr) > 1       # the limit below changes the steps
    assert run_and_compare(tmp_path, _make(perturb, 1), arch, lr) > 0


def test_limited_zo_step_is_bit_exact_on_cortex_m4(arm_tools, tmp_path):
    from mcutrain.codegen.cross import build_mcu_train, run_mcu_train

    arch, perturb, lr, bsz = "digits-cnn", "mix", 0.5, 2
    assert _largest_unlimited_step(arch, perturb, lr) > 1
    qm, batches = model_and_data(arch, 3, bsz)
    res = export_training_library(_make(perturb, 1)(qm), tmp_path / "lib", batch=bsz, kernels="dsp")
    elf = build_mcu_train(tmp_path / "lib", "cortex-m4", tmp_path / "t.elf", kernels="dsp").elf
    data = [(int_engine.quantize_input(qm, x), y) for x, y in batches]
    results, _, _ = run_mcu_train(elf, "cortex-m4", data, lr, res.model, qm.graph.num_classes,
                                  tmp_path / "run")
    sim = _make(perturb, 1)(qm)
    for s, ((x, y), r) in enumerate(zip(batches, results)):
        base = int_engine.run(sim.qm, int_engine.quantize_input(sim.qm, x))
        logits = base[qm.graph.output].reshape(bsz, -1)
        np.testing.assert_array_equal(r.losses, est.per_sample_loss(sim.qm, logits, y),
                                      err_msg=f"step {s} losses")
        sim.step(x, y, lr)
        for e in res.model.state:
            layer, kind = e.name.rsplit(".", 1)
            want = sim.qm.weights[layer] if kind == "weight" else sim.qm.biases[layer]
            np.testing.assert_array_equal(r.state[e.name], want, err_msg=f"step {s} {e.name}")
        assert r.state["rng"] == sim.rng.state, f"step {s} RNG state"
