"""ZO and BP-QAS libraries through a residual add and a depthwise conv, on the host (gcc, ASan +
UBSan): after every step the C library's losses, logits, trained tensors and RNG equal the
simulator's (`test_train_export.run_and_compare`), and its arena is the planner's."""

from __future__ import annotations

import pytest
from test_train_export import model_and_data, run_and_compare

from conftest import needs_gcc
from mcutrain.codegen.dispatch import emit_training
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.zo import ZOConfig, ZOMethod
from mcutrain.plan.memory import account
from mcutrain.plan.schedules import schedule_for
from mcutrain.plan.training import plan_training

ARCH = "tiny-residual"


@needs_gcc
@pytest.mark.parametrize(("perturb", "trainable"), [("wp", "all"), ("np", "all"), ("mix", "all"),
                                                    ("mix", "layers:b.dw,fc")])
def test_zo_through_a_residual_block_is_bit_exact_on_the_host(tmp_path, perturb, trainable):
    """Perturbed depthwise weights (wp), perturbed depthwise outputs with the grouped local
    gradient (np), queries re-run through the add; the sparse selection trains the depthwise conv
    and the head only."""
    def make(qm):
        return ZOMethod(qm, ZOConfig(queries=3, perturb=perturb, trainable=trainable, seed=5))
    assert run_and_compare(tmp_path, make, ARCH, 0.5, steps=2) > 0


@needs_gcc
@pytest.mark.parametrize(("trainable", "momentum"), [("all", 0.9), ("layers:b.pw2,fc", 0.0),
                                                     ("last:1", 0.0)])
def test_bp_qas_through_a_residual_block_is_bit_exact_on_the_host(tmp_path, trainable, momentum):
    """'all': the error splits at the add and sums at the skip tensor (float32, reverse graph
    order) and crosses the depthwise conv; 'b.pw2': only the add's second input needs an error;
    'last:1': everything upstream of the head is frozen (forward only through the block)."""
    def make(qm):
        return BPQASMethod(qm, BPQASConfig(trainable=trainable, momentum=momentum))
    assert run_and_compare(tmp_path, make, ARCH, 0.05, steps=2) > 0


@pytest.mark.parametrize("method", ["zo", "bp-qas"])
def test_residual_arena_is_the_planners(method):
    qm, _ = model_and_data(ARCH, 1, 2)
    m = ZOMethod(qm, ZOConfig(queries=2)) if method == "zo" else BPQASMethod(qm, BPQASConfig(trainable="all"))
    src = emit_training(m, batch=2, kernels="ref")
    plan = plan_training(schedule_for(m, batch=2, kernels="ref"))
    assert src.plan.arena_bytes == plan.arena_bytes and src.plan.offsets == plan.offsets


@pytest.mark.parametrize("method", ["zo", "bp-qas"])
def test_planned_arena_is_the_arena_the_library_lays_out(method):
    """Training only the head, the step's arena (500 bytes at batch 1) is smaller than the forward
    pass `model_predict` runs in the same arena: the planner counts the larger, as the library links."""
    qm, _ = model_and_data(ARCH, 1, 1)
    m = (ZOMethod(qm, ZOConfig(queries=2, trainable="last:1")) if method == "zo"
         else BPQASMethod(qm, BPQASConfig(trainable="last:1")))
    src = emit_training(m, batch=1, kernels="dsp")
    rep = account(schedule_for(m, batch=1, kernels="dsp"), "cortex-m7")
    assert src.plan.arena_bytes < src.inference_arena_bytes == src.arena_bytes
    assert rep.breakdown["ram"]["arena"] == src.arena_bytes
