"""Schedules: structure, what each method keeps, and MACs that agree with the simulators."""

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.engines import ptq
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.methods.zo import ZOConfig, ZOMethod
from mcutrain.plan.schedule import Role, Schedule, ScheduleError
from mcutrain.plan.schedules import build_schedule


def test_schedule_refuses_bad_tensors_and_orders():
    s = Schedule("m", "none", 1)
    s.tensor("x", (2,), "s8", Role.ACTIVATION)
    with pytest.raises(ScheduleError, match="unknown dtype"):
        s.tensor("y", (2,), "int7", Role.ACTIVATION)
    with pytest.raises(ScheduleError, match="declared twice differently"):
        s.tensor("x", (3,), "s8", Role.ACTIVATION)
    with pytest.raises(ScheduleError, match="undeclared tensor 'z'"):
        s.kernel("k", "op", "forward", "n", reads=["z"])
    with pytest.raises(ScheduleError, match="unknown phase"):
        s.kernel("k", "op", "sideways", "n")
    s.kernel("k", "op", "forward", "n", reads=["x"])
    with pytest.raises(ScheduleError, match="reads 'x' before any kernel writes it"):
        s.validate()


def test_to_dict_is_what_the_generator_reads():
    s = build_schedule(zoo.build("digits-cnn"), "fqt", precision="uint8", trainable="last:1")
    d = s.to_dict()
    assert [k["name"] for k in d["kernels"]] == [k.name for k in s.kernels]
    t = {x["name"]: x for x in d["tensors"]}
    assert t["grad:fc.weight"] == {"name": "grad:fc.weight", "shape": [10, 512], "dtype": "u8",
                                   "role": "gradient", "note": "", "bytes": 5120}


def test_fqt_keeps_what_its_backward_reads():
    g = zoo.build("small-cnn")
    s = build_schedule(g, "fqt", precision="mixed", trainable="last:3")   # conv2, fc1, fc2
    kept = {n for n, t in s.tensors.items() if t.role == Role.KEPT}
    # inputs of trained layers (pool1 for conv2, flatten for fc1, fc1 for fc2), activated outputs on
    # the error path (conv2, fc1) and the argmax of pool2; nothing before conv2
    assert kept == {"pool1", "conv2", "pool2.argmax", "flatten", "fc1"}
    assert s.tensors["pool2"].role == Role.ACTIVATION     # flatten is its alias: the storage is kept
    assert s.tensors["err:fc2"].dtype == "f32"            # mixed: float32 errors
    assert s.tensors["conv1"].dtype == "u8"
    assert not any(k.name.startswith("conv1.") and k.phase != "forward" for k in s.kernels)


@pytest.mark.parametrize("prec", ["uint8", "mixed", "float32", "int8"])
def test_fqt_macs_equal_the_simulator(prec):
    g = zoo.build("small-cnn", seed=0)
    x = np.random.default_rng(0).random((1, 28, 28, 1), dtype=np.float32)
    m = FQT(g, FQTConfig(precision=prec, trainable="last:3"), x)
    stats = m.step(x, np.array([3]), 0.01)
    s = build_schedule(g, "fqt", precision=prec, trainable="last:3")
    ph = s.macs_by_phase()
    assert (ph["forward"], ph["error"], ph["weight_grad"]) == \
        (stats.macs["forward"], stats.macs["error"], stats.macs["weight_grad"])


def _int8(g, n=12):
    rng = np.random.default_rng(0)
    x = rng.random((n, *g.input_shape), dtype=np.float32)
    return ptq.quantize_model(g, x), x, rng.integers(0, g.num_classes, n)


@pytest.mark.parametrize("perturb", ["wp", "np", "mix"])
def test_zo_units_and_macs_equal_the_simulator(perturb):
    g = zoo.build("digits-cnn", seed=0)
    qm, x, y = _int8(g)
    zo = ZOMethod(qm, ZOConfig(trainable="all", queries=3, perturb=perturb))
    stats = zo.step(x, y, 0.01)
    for base in ("cache", "recompute"):
        s = build_schedule(g, "zo", trainable="all", batch=len(x), perturb=perturb, queries=3, zo_base=base)
        assert s.options["units"] == [f"{u.kind}:{','.join(u.layers)}" for u in zo.units]
        query_fwd = sum(k.total_macs for k in s.kernels if k.phase == "query" and k.op.endswith("_fwd"))
        base_fwd = s.macs_by_phase()["forward"]
        passes = 1 if base == "cache" else 2    # recompute runs the base pass again up to the last unit
        assert base_fwd + query_fwd <= passes * len(x) * g.total_macs() + query_fwd
        if base == "cache":
            assert base_fwd + query_fwd == stats.macs["forward"]
        assert s.macs_by_phase()["weight_grad"] == stats.macs["weight_grad"]


def test_zo_unit_reads_its_cached_tensors_and_updates_after_its_queries():
    g = zoo.build("mcunet-5fps", 10, (32, 32, 3))
    s = build_schedule(g, "zo", trainable="layers:blocks.4.pw1", perturb="wp", queries=2, zo_base="cache")
    names = [k.name for k in s.kernels]
    # the tail re-runs blocks.4 and reads the cached skip input of blocks.4.add
    q_add = s.kernels[names.index("q:wp:blocks.4.pw1:blocks.4.add.query")]
    assert "a:blocks.3.pw2" in q_add.reads
    assert s.tensors["a:blocks.3.pw2"].role == Role.KEPT
    assert names.index("blocks.4.pw1.update") > names.index("wp:blocks.4.pw1.accumulate")
    assert s.tensors["pw:blocks.4.pw1.weight"].nbytes == g.node("blocks.4.pw1").params["weight"].size


def test_bp_qas_trains_the_sparse_scheme():
    g = zoo.build("digits-cnn", seed=0)
    qm, x, y = _int8(g)
    bp = BPQASMethod(qm, BPQASConfig(trainable="last:1", bias_last=2))
    stats = bp.step(x, y, 0.01)
    b = len(x)
    s = build_schedule(g, "bp-qas", trainable="last:1", bias_last=2, batch=b)
    resident = {n for n, t in s.tensors.items() if t.role == Role.WEIGHT}
    assert resident == {"fc.weight", "fc.bias", "conv2.bias"}
    ph = s.macs_by_phase()
    assert ph["forward"] == stats.macs["forward"]
    fc = b * g.macs(g.node("fc"))
    # the error reaches conv2 (bias trained) through fc; conv2's bias gradient needs no MACs and the
    # error stops there. NOTE: the simulator's count adds conv2's full weight-gradient MACs.
    assert (ph["error"], ph["weight_grad"]) == (fc, fc)
    assert stats.macs["error"] == 2 * fc + b * g.macs(g.node("conv2"))


def test_partial_updates_are_planned_full_with_ranking_scratch():
    """Only the layers that run partial updates get a top-k (the output layer trains fully unless
    partial_output), planned at the worst case (every structure kept), with the C library's
    kept list and update mask as method state."""
    g = zoo.build("small-cnn")
    full = build_schedule(g, "fqt", precision="uint8", trainable="last:2")
    part = build_schedule(g, "fqt", precision="uint8", trainable="last:2", lambda_min=0.5)
    sizes = lambda s: {n: t.nbytes for n, t in s.tensors.items() if t.role not in (Role.SCRATCH, Role.STATE)}
    assert sizes(full) == sizes(part)
    assert part.tensors["fc1.topk"].nbytes == 64 * 5 and "fc2.topk" not in part.tensors
    assert part.tensors["state:fc1.keep"].nbytes == 64 * 5 + 8 and "state:fc2.keep" not in part.tensors
    assert part.tensors["state:partial_offsets"].nbytes == 4 * 3
    assert "state:partial_offsets" not in full.tensors
    assert part.macs_by_phase()["weight_grad"] == full.macs_by_phase()["weight_grad"]
    assert part.decisions.partial_layers == ("fc1",)
    assert part.decisions.partial_policy("fc1").lambda_min == 0.5
    both = build_schedule(g, "fqt", precision="uint8", trainable="last:2", lambda_min=0.5,
                          partial_output=True)
    assert both.tensors["fc2.topk"].nbytes == 10 * 5
    assert both.decisions.partial_layers == ("fc1", "fc2")
    head_only = build_schedule(g, "fqt", precision="uint8", trainable="last:1", lambda_min=0.5)
    assert head_only.decisions.partial == () and "fc2.topk" not in head_only.tensors


def test_unknown_method_and_bad_batch():
    g = zoo.build("digits-cnn")
    with pytest.raises(ValueError, match="unknown method 'sgd'"):
        build_schedule(g, "sgd")
    with pytest.raises(ValueError, match="batch must be at least 1"):
        build_schedule(g, "fqt", batch=0)
    with pytest.raises(ValueError, match="unknown FQT precision"):
        build_schedule(g, "fqt", precision="int4")


def test_float32_fqt_keeps_float_weights_in_ram_and_flash():
    g = G.Graph((3,), [G.linear("a", G.INPUT, 4, act="relu", in_features=3),
                       G.linear("b", "a", 2, in_features=4)], "t")
    s = build_schedule(g, "fqt", precision="float32", trainable="last:1")
    assert s.tensors["b.weight"].nbytes == 4 * 8 and s.tensors["b.weight"].role == Role.WEIGHT
    assert s.frozen_bytes == {"a.weight": 4 * 12, "a.bias": 4 * 4}


def test_schedule_for_a_built_method_equals_the_builder():
    from mcutrain.methods.float import FloatMethod
    from mcutrain.plan.schedules import schedule_for
    g = zoo.build("digits-cnn", seed=0)
    qm, x, _ = _int8(g)
    built = [
        (FQT(g, FQTConfig(precision="uint8", trainable="last:2"), x[:2]),
         build_schedule(g, "fqt", precision="uint8", trainable="last:2", batch=4)),
        (ZOMethod(qm, ZOConfig(trainable="last:2", queries=3, perturb="np")),
         build_schedule(g, "zo", trainable="last:2", queries=3, perturb="np", batch=4)),
        (BPQASMethod(qm, BPQASConfig(trainable="last:1", bias_last=2)),
         build_schedule(g, "bp-qas", trainable="last:1", bias_last=2, batch=4)),
        (FloatMethod(g.copy(), "sgd", trainable=["fc"]),
         build_schedule(g, "float", trainable="last:1", batch=4)),
    ]
    for m, want in built:
        got = schedule_for(m, batch=4)
        assert [k.name for k in got.kernels] == [k.name for k in want.kernels], m.name
    with pytest.raises(ValueError, match="no schedule for method"):
        schedule_for(object())
