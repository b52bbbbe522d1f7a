"""FQT int8 libraries of "tflite"-rounding models under QEMU: Cortex-M0+ (reference kernels), M4, M7
and M33 (DSP kernels) and M55 (the Helium twins first) step bit-exactly with the simulated `FQT`
(losses, logits, every state entry, the RNG after every step), trained whole, in the last layers and
with partial updates, and a model with residual ADDs and a MEAN (MCUNet's last blocks) on the M4.
Needs the ARM cross toolchain and QEMU."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.codegen.cross import build_mcu_train, run_mcu_train
from mcutrain.codegen.emit_fqt import quantize_input
from mcutrain.codegen.library import export_training_library
from mcutrain.engines import ptq
from mcutrain.mcu.twin import first_mismatch, simulate_fqt_steps
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig

pytestmark = pytest.mark.slow  # minutes of QEMU in all: started first, beside the other modules

LR = 0.05
RUNS = [("cortex-m0plus", "ref"), ("cortex-m4", "dsp"), ("cortex-m7", "dsp"), ("cortex-m33", "dsp"),
        ("cortex-m55", "dsp")]


def tflite_model(arch: str, shape=None):
    g = zoo.build(arch, num_classes=10, input_shape=shape, seed=1)
    rng = np.random.default_rng(2)
    x = rng.random((8, *g.input_shape), dtype=np.float32)
    return ptq.quantize_model(g, x, rounding="tflite"), rng


def steps_on(tmp_path, qm, rng, cfg: FQTConfig, core: str, kernels: str, steps: int = 2, warm: int = 0):
    """Export, cross-build and run `steps` steps from the state after `warm` simulated ones; the mismatch."""
    x = rng.random((warm + steps, *qm.graph.input_shape), dtype=np.float32)
    y = rng.integers(0, qm.graph.num_classes, warm + steps)
    batches = [(x[i:i + 1], y[i:i + 1]) for i in range(warm + steps)]
    m = FQT(qm, dataclasses.replace(cfg, lambda_min=1.0) if warm else cfg, x[:1])
    for bx, by in batches[:warm]:
        m.step(bx, by, LR)
    state = m.state()

    def new() -> FQT:
        f = FQT(qm, cfg, x[:1])
        f.load_state(*state)
        return f
    lib = tmp_path / "lib"
    res = export_training_library(new(), lib, batch=1, kernels=kernels, target=core)  # M55: the MVE twins
    b = build_mcu_train(lib, core, tmp_path / "t.elf", kernels=kernels)
    rest = batches[warm:]
    mcu, prof, _ = run_mcu_train(b.elf, core, [(quantize_input(new(), bx), by) for bx, by in rest], LR,
                                 res.model, qm.graph.num_classes, tmp_path / "run", timeout=900)
    sim = simulate_fqt_steps(new(), rest, LR, res.model)
    return first_mismatch(sim, mcu), (lib / "model.c").read_text(), prof.region.total


@pytest.mark.parametrize(("core", "kernels"), RUNS, ids=[c for c, _ in RUNS])
@pytest.mark.parametrize(("trainable", "lambda_min", "warm"), [("all", 1.0, 0), ("last:2", 1.0, 0),
                                                               ("all", 0.1, 2)],
                         ids=["all", "last2", "partial"])
def test_fqt_int8_of_a_tflite_model_steps_bit_exactly(arm_tools, tmp_path, core, kernels, trainable,
                                                      lambda_min, warm):
    qm, rng = tflite_model("digits-cnn")
    cfg = FQTConfig(precision="int8", trainable=trainable, seed=5, lambda_min=lambda_min)
    mismatch, source, _ = steps_on(tmp_path, qm, rng, cfg, core, kernels, warm=warm)
    assert mismatch == ""
    assert "#if !MT_ROUNDING_TFLITE" in source
    assert ("_keep(" in source) == (lambda_min < 1)


def test_residual_adds_and_mean_step_bit_exactly_on_the_m4(arm_tools, tmp_path):
    """MCUNet-5FPS at 32x32, its last two blocks and the head trained: block 12's residual ADD and the
    global average pool run TFLite's kernels, with the ADD's multipliers computed on the device."""
    qm, rng = tflite_model("mcunet-5fps", (32, 32, 3))
    mismatch, source, _ = steps_on(tmp_path, qm, rng, FQTConfig(precision="int8", trainable="last:7", seed=5),
                                   "cortex-m4", "dsp")
    assert mismatch == ""
    assert "mt_add_fwd_s8_tflite_range(" in source and "mt_global_avgpool_fwd_s8_tflite(" in source
