"""The whole-step ZO test on emulated Cortex-M0+ and RV32IMC (the m0/ twins), M4, M7, M33 and M55
(Helium twins):
`drivers/train_step.c` cross-built with the runtime, run under QEMU, bit-exact with `ZOMethod` after
every step; the instructions of
one training step (between the step markers) are printed."""

from __future__ import annotations

import numpy as np
import pytest
from test_train_kernels import compare_steps, zo_case
from train_driver import (
    DRIVERS,
    HELIUM_INCLUDES,
    M0_INCLUDES,
    RUNTIME_INCLUDES,
    read_step_results,
    runtime_sources,
    write_step_file,
)

from mcutrain.engines import int_engine
from mcutrain.mcu import build, count_instructions

CORES = ("cortex-m0plus", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55", "rv32imc")



@pytest.mark.parametrize("core", CORES)
def test_zo_steps_on_cortex_m(target_tools, tmp_path, core):
    steps, lr = 3, 0.05
    qm, batches, m, cfg, kinds = zo_case("digits-cnn", "mix", 4, lr, steps=steps)
    data = [(int_engine.quantize_input(qm, x), y) for x, y in batches]
    write_step_file(tmp_path / "steps.bin", qm, cfg, data)
    kernels = "ref" if core in ("cortex-m0plus", "rv32imc") else "dsp"   # DSP twins where the core has DSP
    helium = core == "cortex-m55"                            # and the MVE twins first on the M55
    m0 = core in ("cortex-m0plus", "rv32imc")                # the m0/ twins first, as their exports
    includes = HELIUM_INCLUDES if helium else M0_INCLUDES if m0 else RUNTIME_INCLUDES
    elf = build([DRIVERS / "train_step.c", *runtime_sources(kernels, helium, m0)], core,
                tmp_path / "train_step.elf", include_dirs=includes,
                defines=["MT_BOARD", "TS_ARENA_BYTES=(256*1024)"]).elf
    prof = count_instructions(elf, core, ["steps.bin", "out.bin"], cwd=tmp_path, timeout=300)
    assert prof.region is not None and prof.n_regions == steps
    results = read_step_results(tmp_path / "out.bin", qm, list(kinds), len(batches[0][1]), steps)
    assert compare_steps(results, m, batches, lr, list(kinds)) > 0
    per_step = prof.region.total / prof.n_regions
    top = sorted(prof.region.per_function.items(), key=lambda kv: -kv[1])[:4]
    print(f"\n{core}: digits-cnn zo mix (B=4, 4 queries, units {kinds}): "
          f"{per_step:,.0f} instructions per step; top: "
          + ", ".join(f"{k} {v / prof.n_regions:,.0f}" for k, v in top))
    assert np.isfinite(per_step) and per_step > 0
