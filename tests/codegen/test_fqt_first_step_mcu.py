"""A batch's first FQT step on an emulated Cortex-M4 (QEMU): its range-seeding rounds restore the kept
logits and small relu outputs instead of running the forward pass again, so the step runs the forward
kernels once per round that reads a larger forward tensor, plus the first round and the step itself
(small-cnn's shape: 3 passes, not 1 + 4 error tensors), and stays bit-exact with the simulated `FQT`.
Needs the ARM cross toolchain and QEMU."""

from __future__ import annotations

import numpy as np

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.cross import build_mcu_train, run_mcu_train
from mcutrain.codegen.emit_fqt import quantize_input
from mcutrain.codegen.library import export_training_library
from mcutrain.engines import ptq
from mcutrain.mcu.twin import first_mismatch, simulate_fqt_steps
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.plan.fqt_ranges import error_range_keys, error_range_owners, seed_keep, seed_pass_kernels

CORE = "cortex-m4"
BATCH = 2


def _graph() -> G.Graph:
    """small-cnn at 8x8: conv, pool, conv, pool, flatten, linear with relu, linear."""
    nodes = [G.conv2d("conv1", G.INPUT, 4, 3, padding=1, act="relu", in_channels=1),
             G.maxpool("pool1", "conv1", 2),
             G.conv2d("conv2", "pool1", 8, 3, padding=1, act="relu", in_channels=4),
             G.maxpool("pool2", "conv2", 2),
             G.flatten("flatten", "pool2"),
             G.linear("fc1", "flatten", 16, act="relu", in_features=32),
             G.linear("fc2", "fc1", 3, in_features=16)]
    return zoo.he_init(G.Graph((8, 8, 1), nodes, "tiny-cnn"), seed=2)


def _forward_passes_expected(m: FQT, schedule) -> tuple[int, int]:
    """(passes now, passes of one round per error tensor): the step's own forward, the first round's,
    and one per later round whose error tensor the kept tensors do not reach."""
    keys = error_range_keys(m.graph, m.needs)
    keep = seed_keep(schedule, False)
    served = {keys[w.split(":", 1)[1]] for k in seed_pass_kernels(schedule, False) if k.name in keep.covered
              for w in k.writes if w.startswith(("err:", "errm:"))}
    owners = error_range_owners(m.graph, m.needs)
    return 2 + sum(o not in served for o in owners[1:]), 1 + len(owners)


def test_the_first_step_restores_kept_tensors_instead_of_forward_passes(arm_tools, tmp_path):
    g = _graph()
    rng = np.random.default_rng(3)
    x = rng.random((2 * BATCH, *g.input_shape), dtype=np.float32)
    qm = ptq.quantize_model(g, rng.random((32, *g.input_shape), dtype=np.float32))
    cfg = FQTConfig(precision="int8", trainable="all", seed=1)
    batches = [(x[:BATCH], np.array([0, 2])), (x[BATCH:], np.array([1, 0]))]
    res = export_training_library(FQT(qm, cfg, x[:BATCH]), tmp_path / "lib", batch=BATCH, kernels="ref")
    b = build_mcu_train(tmp_path / "lib", CORE, tmp_path / "t.elf", kernels="ref")
    data = [(quantize_input(FQT(qm, cfg, x[:BATCH]), bx), by) for bx, by in batches]
    mcu, prof, _ = run_mcu_train(b.elf, CORE, data, 0.05, res.model, 3, tmp_path / "run", timeout=600)
    assert first_mismatch(simulate_fqt_steps(FQT(qm, cfg, x[:BATCH]), batches, 0.05, res.model), mcu) == ""
    _, prof1, _ = run_mcu_train(b.elf, CORE, data[:1], 0.05, res.model, 3, tmp_path / "run1", timeout=600)

    def fwd(p) -> int:
        return sum(v for f, v in p.region.per_function.items() if "_fwd_" in f)
    first, both = fwd(prof1), fwd(prof)
    now, before = _forward_passes_expected(FQT(qm, cfg, x[:BATCH]), res.model.plan.schedule)
    assert now < before
    assert abs(first / (both - first) - now) < 0.2, (first, both - first, now)
