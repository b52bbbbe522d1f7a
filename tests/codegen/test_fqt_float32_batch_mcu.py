"""FQT float32 with a batch on an emulated Cortex-M4 (QEMU, DSP kernels): the loss quantizes each sample's
logits with that sample's own range, so the step runs the forward pass once per sample (no pass over the
batch to find a range first), and stays bit-exact with the simulated `FQT` (losses, logits, every state
entry) after every step. Needs the ARM cross toolchain and QEMU."""

from __future__ import annotations

import numpy as np
import pytest
from test_fqt_precisions import pool_graph

from mcutrain.codegen.cross import build_mcu_train, run_mcu_train
from mcutrain.codegen.emit_fqt import quantize_input
from mcutrain.codegen.library import export_training_library
from mcutrain.mcu.twin import first_mismatch, simulate_fqt_steps
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig

pytestmark = pytest.mark.slow  # two QEMU builds and runs

CORE = "cortex-m4"
KERNELS = "dsp"
STEPS = 2
LR = 0.05


def _forward_instructions(tmp_path, batch: int) -> tuple[str, int]:
    """STEPS steps of `batch` samples on the M4: the first mismatch with the simulator and the
    instructions of the forward kernels over the run."""
    g = pool_graph()
    rng = np.random.default_rng(4)
    x = rng.random((8 + batch * STEPS, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, g.num_classes, 8 + batch * STEPS)
    cfg = FQTConfig(precision="float32", seed=5, exact_float_order=True)
    at = [8 + i * batch for i in range(STEPS)]
    batches = [(x[a:a + batch], y[a:a + batch]) for a in at]
    lib, work = tmp_path / f"lib{batch}", tmp_path / f"run{batch}"
    res = export_training_library(FQT(g, cfg, x[:8]), lib, batch=batch, kernels=KERNELS, target=CORE)
    b = build_mcu_train(lib, CORE, tmp_path / f"t{batch}.elf", kernels=KERNELS)
    q = FQT(g, cfg, x[:8])
    mcu, prof, _ = run_mcu_train(b.elf, CORE, [(quantize_input(q, bx), by) for bx, by in batches], LR,
                                 res.model, g.num_classes, work, timeout=600)
    sim = simulate_fqt_steps(FQT(g, cfg, x[:8]), batches, LR, res.model)
    fwd = sum(v for f, v in prof.region.per_function.items() if "_fwd_" in f)
    return first_mismatch(sim, mcu), fwd


def test_a_float32_batch_runs_one_forward_per_sample_bit_exactly_on_the_m4(arm_tools, tmp_path):
    batch = 3
    mismatch1, fwd1 = _forward_instructions(tmp_path, 1)
    mismatch, fwd = _forward_instructions(tmp_path, batch)
    assert mismatch1 == "" and mismatch == ""
    # batch samples per step, one forward each (a pass to find the batch's range first would double it)
    assert abs(fwd / fwd1 - batch) < 0.2, (fwd, fwd1)
