"""The simulator, the planner and the generated library read one `StepDecisions` per configuration.

For each configuration the method built for simulation, the planner's schedule built from a plan
request with the same settings (`build_schedule`, what `mcutrain plan` runs) and the library the
code generator writes (`export_training_library(...).model`) must name the same partial-update
layers with the same lambdas and the same number formats: their decisions' fingerprints are equal,
and the library's schedule holds the very object the simulator holds.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.library import export_training_library
from mcutrain.engines import ptq
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.methods.zo import ZOConfig, ZOMethod
from mcutrain.plan.schedules import build_schedule, schedule_for


def _graph() -> G.Graph:
    """conv(relu) -> maxpool -> conv(relu6, stride 2) -> flatten -> linear on 8x8x1 (sequential)."""
    nodes = [G.conv2d("conv1", G.INPUT, 3, 3, padding=1, act="relu", in_channels=1),
             G.maxpool("pool", "conv1", 2),
             G.conv2d("conv2", "pool", 4, 3, stride=2, padding=1, act="relu6", in_channels=3),
             G.flatten("flat", "conv2"),
             G.linear("fc", "flat", 5, in_features=2 * 2 * 4)]
    return zoo.he_init(G.Graph((8, 8, 1), nodes, "agree"), seed=3)


def _x() -> np.ndarray:
    return np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)


# (label, method settings, plan request settings, expected partial layers, expected formats)
FQT_CASES = [
    ("int8 partial 0.1 all", dict(precision="int8", trainable="all", lambda_min=0.1),
     ("conv1", "conv2"), ("s8", "s32", "s8", "s8", "s32")),
    ("int8 partial 0.5 all", dict(precision="int8", trainable="all", lambda_min=0.5, lambda_max=0.8),
     ("conv1", "conv2"), ("s8", "s32", "s8", "s8", "s32")),
    ("int8 partial 0.1 last:2", dict(precision="int8", trainable="last:2", lambda_min=0.1),
     ("conv2",), ("s8", "s32", "s8", "s8", "s32")),
    ("int8 partial 0.5 last:2 output", dict(precision="int8", trainable="last:2", lambda_min=0.5,
                                            partial_output=True),
     ("conv2", "fc"), ("s8", "s32", "s8", "s8", "s32")),
    ("uint8", dict(precision="uint8", trainable="all"), (), ("u8", "s32", "u8", "u8", "u8")),
    ("uint8 partial 0.5", dict(precision="uint8", trainable="all", lambda_min=0.5),
     ("conv1", "conv2"), ("u8", "s32", "u8", "u8", "u8")),
    ("mixed", dict(precision="mixed", trainable="all"), (), ("u8", "s32", "u8", "f32", "f32")),
    ("float32", dict(precision="float32", trainable="all"), (), ("f32", "f32", "f32", "f32", "f32")),
]


@pytest.mark.parametrize("label,kw,partial,formats", FQT_CASES, ids=[c[0] for c in FQT_CASES])
def test_fqt_simulator_planner_and_library_share_one_decision(label, kw, partial, formats, tmp_path):
    m = FQT(_graph(), FQTConfig(seed=5, **kw), _x())
    d = m.decisions
    assert d.partial_layers == partial, label
    assert tuple(vars(d.formats).values()) == formats, label
    for _, policy in d.partial:
        assert (policy.lambda_min, policy.lambda_max) == (kw["lambda_min"], kw.get("lambda_max", 1.0))
    planned = build_schedule(_graph(), "fqt", batch=1, kernels="ref", **kw)
    assert planned.decisions.fingerprint() == d.fingerprint(), label
    # a top-k is planned exactly for the layers that run partial updates
    assert sorted(k.node for k in planned.kernels if k.op == "partial_topk") == sorted(partial), label
    lib = export_training_library(m, tmp_path, batch=1, kernels="ref").model
    assert lib.plan.schedule.decisions is d
    assert lib.plan.arena_bytes == lib.arena_bytes
    assert _partial_statics(tmp_path / "model.c") == sum(
        t.nbytes for n, t in planned.tensors.items() if n.endswith(".keep") or n == "state:partial_offsets")
    # the plan request's step is the library's step, tensor for tensor
    assert {n: t.nbytes for n, t in planned.tensors.items()} == \
        {n: t.nbytes for n, t in lib.plan.schedule.tensors.items()}


_PARTIAL_STATIC = re.compile(r"^static (int32_t|uint8_t) "
                             r"(fqt_[kn]_\w+|fqt_off_\w+|fqt_draws|\w+_keep|\w+_upd)(?:\[(\d+)\])?;", re.M)


def _partial_statics(model_c) -> int:
    """Bytes of the partial-update statics (mt_fqt_keep.h's lists, masks, counts, draw offsets) in C."""
    return sum((4 if ty == "int32_t" else 1) * int(n or 1)
               for ty, _, n in _PARTIAL_STATIC.findall(model_c.read_text()))


def test_the_simulator_prunes_the_layers_its_decisions_name():
    """Replace the method's decisions with one without partial layers: the step trains every
    structure (the simulator reads the object, it does not re-derive from its config)."""
    x, y = _x(), np.arange(8) % 5
    a = FQT(_graph(), FQTConfig(precision="int8", trainable="all", lambda_min=0.1, seed=5), x)
    b = FQT(_graph(), FQTConfig(precision="int8", trainable="all", lambda_min=0.1, seed=5), x)
    b.decisions = replace(b.decisions, partial=())
    full = schedule_for(b, batch=8).macs_by_phase()["weight_grad"]
    pruned = a.step(x, y, 0.01).macs["weight_grad"]
    assert b.step(x, y, 0.01).macs["weight_grad"] == full
    assert pruned < full


ZO_CASES = ["wp", "np", "mix"]


@pytest.mark.parametrize("perturb", ZO_CASES)
def test_zo_simulator_planner_and_library_share_one_decision(perturb, tmp_path):
    g = _graph()
    qm = ptq.quantize_model(g, _x())
    m = ZOMethod(qm, ZOConfig(trainable="last:2", queries=3, perturb=perturb, seed=5))
    planned = build_schedule(g, "zo", trainable="last:2", queries=3, perturb=perturb, batch=2, kernels="ref")
    assert planned.decisions.fingerprint() == m.decisions.fingerprint()
    assert m.decisions.weight_layers == ("conv2", "fc") and m.decisions.formats.act == "s8"
    lib = export_training_library(m, tmp_path, batch=2, kernels="ref").model
    assert lib.plan.schedule.decisions is m.decisions


def test_bp_qas_simulator_planner_and_library_share_one_decision(tmp_path):
    g = _graph()
    qm = ptq.quantize_model(g, _x())
    m = BPQASMethod(qm, BPQASConfig(trainable="last:1", bias_last=2, momentum=0.9))
    planned = build_schedule(g, "bp-qas", trainable="last:1", bias_last=2, momentum=0.9, batch=2,
                             kernels="ref")
    assert planned.decisions.fingerprint() == m.decisions.fingerprint()
    assert (m.decisions.weight_layers, m.decisions.bias_layers) == (("fc",), ("conv2", "fc"))
    assert m.decisions.fused_update
    lib = export_training_library(m, tmp_path, batch=2, kernels="ref").model
    assert lib.plan.schedule.decisions is m.decisions
    assert lib.plan.schedule.options["bias_last"] == 2


def test_different_settings_give_different_fingerprints():
    g = _graph()
    prints = {build_schedule(g, "fqt", precision="int8", lambda_min=lo).decisions.fingerprint()
              for lo in (1.0, 0.5, 0.1)}
    prints.add(build_schedule(g, "fqt", precision="uint8").decisions.fingerprint())
    assert len(prints) == 4
