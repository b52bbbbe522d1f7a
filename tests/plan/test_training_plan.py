"""Training lifetimes and arena: two tiny plans by hand, and invariants over every zoo model and method."""

import itertools

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.plan import plan_inference_arena
from mcutrain.plan.memory import STACK_ALLOWANCE, account
from mcutrain.plan.schedule import Role
from mcutrain.plan.schedules import build_schedule
from mcutrain.plan.training import plan_training, tensor_lifetimes


def one_linear() -> G.Graph:
    return G.Graph((4,), [G.linear("fc", G.INPUT, 2, in_features=4)], "one-linear")


def two_linear() -> G.Graph:
    return G.Graph((2,), [G.linear("a", G.INPUT, 2, act="relu", in_features=2),
                          G.linear("b", "a", 2, in_features=2)], "two-linear")


def test_fqt_uint8_one_linear_by_hand():
    s = build_schedule(one_linear(), "fqt", precision="uint8", trainable="all", kernels="ref")
    assert [k.name for k in s.kernels] == ["fc.fwd", "loss", "fc.bwd_w", "fc.update", "ema_update"]
    sizes = {t: s.tensors[t].nbytes for t in ("input", "fc", "loss", "err:fc", "grad:fc.weight",
                                                "grad:fc.bias")}
    assert sizes == {"input": 4, "fc": 2, "loss": 4, "err:fc": 2, "grad:fc.weight": 8, "grad:fc.bias": 8}
    life = tensor_lifetimes(s)
    assert life == {"input": (0, 2), "fc": (0, 4), "loss": (1, 4), "err:fc": (1, 2),
                    "grad:fc.weight": (2, 3), "grad:fc.bias": (2, 3)}
    p = plan_training(s)
    # greedy, largest first: grads 0..8 and 8..16; input 16..20; loss 20..24; logits 24..26;
    # the error, alive with all of them, at the next aligned offset 28..30
    assert p.offsets == {"grad:fc.weight": 0, "grad:fc.bias": 8, "input": 16, "loss": 20, "fc": 24,
                         "err:fc": 28}
    assert p.arena_bytes == 32
    r = account(s, "cortex-m4", p)
    # weights u8 8 + bias s32 8; state: the C range records of the activation (28 + scale and zero
    # point 8), the error and the gradient (28 each), the weight range 16, norm 2 x 9, bias scales
    # 2 x 4, float32 multiplier 4, bias steps 2 x 4, counters 3 x 4, range scratch (2 x 2 + 2) x 4
    state = 36 + 28 + 28 + 16 + 18 + 8 + 4 + 8 + 12 + 24
    assert r.breakdown["ram"] == {"arena": 32, "trainable weights and biases": 16, "method state": state,
                                  "stack allowance": STACK_ALLOWANCE}
    assert r.ram_bytes == 32 + 16 + state + STACK_ALLOWANCE
    code = 520 + (1354 + 320) + 210 + 600 + 600 + 32 * 5   # linear fwd, loss, bwd_w, 2 unmeasured, calls
    assert r.breakdown["flash"] == {"frozen weights and biases": 0, "trainable initial values": 16,
                                    "quantization constants": 0, "code (estimate)": code}
    assert r.macs_per_step["forward"] == 8 and r.macs_per_step["weight_grad"] == 8


def test_zo_two_linear_by_hand():
    s = build_schedule(two_linear(), "zo", trainable="last:1", batch=2, perturb="wp", queries=3,
                       kernels="ref", zo_base="cache")
    assert [k.name for k in s.kernels] == [
        "a:a.fwd", "a:b.fwd", "a:loss", "wp:b.zero", "wp:b.perturb.b", "q:wp:b:b.query", "wp:b.loss",
        "wp:b.accumulate", "b.update"]
    life = tensor_lifetimes(s)
    # a:a is the unit's cached input: read inside the query loop (steps 4..7), so alive to its end
    assert life == {"input": (0, 0), "a:a": (0, 7), "a:b": (1, 2), "l0": (2, 8), "S:wp:b": (3, 8),
                    "pw:b.weight": (4, 5), "pw:b.bias": (4, 5), "q:wp:b:b": (5, 6), "lq:wp:b": (6, 7)}
    p = plan_training(s)
    assert p.offsets == {"S:wp:b": 0, "l0": 48, "pw:b.bias": 56, "lq:wp:b": 56, "input": 0, "a:a": 64,
                         "a:b": 0, "pw:b.weight": 68, "q:wp:b:b": 72}
    assert p.arena_bytes == 76
    r = account(s, "cortex-m4", p)
    assert r.breakdown["ram"] == {"arena": 76, "trainable weights and biases": 4 + 8, "method state": 8,
                                  "stack allowance": STACK_ALLOWANCE}
    code = 520 + 1674 + 298 + 810 + 1540 + 32 * 9
    assert r.breakdown["flash"] == {"frozen weights and biases": 4 + 8, "trainable initial values": 12,
                                    "quantization constants": 2 * 8 * 2, "code (estimate)": code}
    m = r.macs_per_step
    assert (m["forward"], m["loss"], m["query"], m["update"]) == (16, 4, 3 * (8 + 4 + 6), 6)


CASES = [
    ("none", {}),
    ("fqt", {"precision": "uint8", "trainable": "all"}),
    ("fqt", {"precision": "mixed", "trainable": "last:2"}),
    ("fqt", {"precision": "float32", "trainable": "last:1"}),
    ("fqt", {"precision": "int8", "trainable": "all", "batch": 4, "lambda_min": 0.1,
             "partial_output": True}),
    ("zo", {"trainable": "all", "perturb": "mix", "queries": 4, "batch": 2}),
    ("zo", {"trainable": "all", "perturb": "np", "queries": 2, "zo_base": "recompute"}),
    ("zo", {"trainable": "last:2", "perturb": "wp", "queries": 2, "mask": "randk:0.5"}),
    ("bp-qas", {"trainable": "last:2", "bias_last": 3, "batch": 2, "momentum": 0.9}),
    ("float", {"trainable": "all", "batch": 2}),
]
SMALL = ["digits-cnn", "small-cnn", "mnist1d-cnn"]


def assert_no_overlap(p) -> None:
    """Independent of the planner: tensors alive at the same step never share a byte, except the
    tensors one storage holds in turn (each hands over at the step the next is written) and aliases."""
    s = p.schedule
    life = tensor_lifetimes(s)
    alias = {frozenset(pair) for k in s.kernels for pair in k.alias}
    names = sorted(life)
    for a, b in itertools.combinations(names, 2):
        (fa, la), (fb, lb) = life[a], life[b]
        if fa > lb or fb > la or frozenset((a, b)) in alias:
            continue
        if p.storage_of[a] == p.storage_of[b]:
            assert la == fb or lb == fa, f"{a} and {b} share storage while both alive"
            continue
        oa, ob = p.offsets[a], p.offsets[b]
        assert oa + s.tensors[a].nbytes <= ob or ob + s.tensors[b].nbytes <= oa, f"{a} overlaps {b}"


@pytest.mark.parametrize("arch", SMALL)
@pytest.mark.parametrize("method,kw", CASES, ids=[f"{m}-{i}" for i, (m, _) in enumerate(CASES)])
def test_arena_invariants_small_models(arch, method, kw):
    g = zoo.build(arch)
    s = build_schedule(g, method, **kw)
    p = plan_training(s)
    assert_no_overlap(p)
    live = p.live_bytes()
    assert p.arena_bytes >= max(live)                          # at least what is alive at the peak
    assert p.arena_bytes <= sum(st.size + 3 for st in p.storages)
    r = account(s, "cortex-m7", p)
    assert r.ram_bytes == p.arena_bytes + sum(s.resident_bytes().values()) + STACK_ALLOWANCE
    # every resident write is an update in place: no kernel writes an arena copy of the weights
    for k in s.kernels:
        if k.phase == "update":
            assert all(s.tensors[t].resident for t in k.writes)


@pytest.mark.parametrize("method,kw", [
    ("fqt", {"precision": "uint8", "trainable": "last:7"}),
    ("fqt", {"precision": "int8", "trainable": "last:3", "batch": 2}),
    ("zo", {"trainable": "layers:blocks.4-7.pw1", "queries": 2}),
    ("bp-qas", {"trainable": "layers:blocks.12.pw1,blocks.13.pw1", "bias_last": 10}),
    ("float", {"trainable": "last:4", "batch": 2}),
    ("zo", {"trainable": "all", "queries": 2, "zo_base": "recompute"}),
])
def test_arena_invariants_mcunet(method, kw):
    g = zoo.build("mcunet-5fps", 10, (64, 64, 3))
    p = plan_training(build_schedule(g, method, **kw))
    assert_no_overlap(p)
    assert p.arena_bytes >= max(p.live_bytes())


@pytest.mark.parametrize("arch", [*SMALL, "mcunet-5fps"])
def test_inference_schedule_matches_the_inference_arena(arch):
    g = zoo.build(arch)
    for kernels in ("ref", "dsp"):
        p = plan_training(build_schedule(g, "none", kernels=kernels))
        ref = plan_inference_arena(g, kernels=kernels)
        assert p.arena_bytes == ref.arena_bytes
        assert {t: p.offsets[t] for t in ref.offsets} == ref.offsets


def test_fqt_batch_only_stretches_the_gradient_buffers():
    g = zoo.build("small-cnn")
    one = build_schedule(g, "fqt", precision="int8", trainable="last:2", batch=1)
    many = build_schedule(g, "fqt", precision="int8", trainable="last:2", batch=16)
    acts = lambda s: {n: t.nbytes for n, t in s.tensors.items() if t.role in (Role.ACTIVATION, Role.KEPT)}
    assert acts(one) == acts(many)                              # one sample at a time either way
    l1, l16 = tensor_lifetimes(one), tensor_lifetimes(many)
    k1 = {k.name: i for i, k in enumerate(one.kernels)}
    k16 = {k.name: i for i, k in enumerate(many.kernels)}
    assert l1["grad:fc2.weight"] == (k1["fc2.bwd_w"], k1["fc2.update"])
    first_loop = min(i for i, k in enumerate(many.kernels) if k.loop == "sample")
    assert l16["grad:fc2.weight"][0] < first_loop and l16["grad:fc2.weight"][1] == k16["fc2.update"]
    assert all(k.repeat == 16 for k in many.kernels if k.loop == "sample")


def test_zo_and_bp_activations_scale_with_the_batch():
    g = zoo.build("small-cnn")
    for method in ("zo", "bp-qas"):
        a = plan_training(build_schedule(g, method, trainable="last:1", batch=1, queries=2))
        b = plan_training(build_schedule(g, method, trainable="last:1", batch=8, queries=2))
        assert b.arena_bytes > 4 * a.arena_bytes


def test_in_place_relu_add_mask_and_alias():
    g = G.Graph((4, 4, 2), [
        G.conv2d("c", G.INPUT, 2, 1, in_channels=2),
        G.maxpool("p", "c", 1),
        G.relu("r", "p"),                      # after a pool: stays a standalone relu
        G.conv2d("c2", G.INPUT, 2, 1, in_channels=2),
        G.add("s", "r", "c2"),
        G.flatten("f", "s"),
        G.linear("fc", "f", 3, in_features=32)])
    s = build_schedule(g, "float", trainable="all", kernels="ref")
    p = plan_training(s)
    assert p.storage_of["r"] == p.storage_of["p"]              # relu into its dead input
    # the add writes into c2, its dead input; r stays alive (the backward reads it for the mask)
    assert p.storage_of["s"] == p.storage_of["c2"] != p.storage_of["r"]
    assert p.storage_of["f"] == p.storage_of["s"]              # flatten is an alias
    assert p.storage_of["errm:r"] == p.storage_of["err:s"]     # the relu mask works in place
    assert_no_overlap(p)
    lin = plan_training(s, planner="linear")
    assert lin.arena_bytes == sum(int(np.ceil(st.size / 4)) * 4 for st in lin.storages)
    assert lin.arena_bytes > p.arena_bytes


def two_branches() -> G.Graph:
    """x -> (a, b) -> add -> fc: a residual add whose inputs both need the add's error."""
    return zoo.he_init(G.Graph((4, 4, 1), [
        G.conv2d("x", G.INPUT, 4, 3, padding=1, act="relu", in_channels=1),
        G.conv2d("a", "x", 4, 1, in_channels=4), G.conv2d("b", "x", 4, 1, in_channels=4),
        G.add("s", "a", "b"), G.flatten("f", "s"), G.linear("fc", "f", 3, in_features=64)], "two"), seed=1)


@pytest.mark.parametrize("batch", [1, 4])
def test_a_partial_layer_masks_its_own_copy_of_an_error_a_later_branch_reads(batch):
    """The backward pass reaches b before a: b's top-k would mask the add's error that a still reads,
    so b masks a planned copy (one error's bytes, alive until b's last read); a is the add's error's
    last reader and masks it in place."""
    s = build_schedule(two_branches(), "fqt", lambda_min=0.5, batch=batch)
    assert [(k.node, k.reads, k.writes) for k in s.kernels if k.op == "error_copy"] == \
        [("b", ["err:s"], ["errp:b"])]
    assert s.tensors["errp:b"].nbytes == s.tensors["err:s"].nbytes == 64
    topk = {k.node: k.writes[-1] for k in s.kernels if k.op == "partial_topk"}
    assert topk == {"b": "errp:b", "a": "err:s", "x": "errm:x"}
    p = plan_training(s)
    assert_no_overlap(p)
    life = tensor_lifetimes(s)
    assert life["errp:b"][0] < life["err:s"][1] and "errp:b" not in p.storages[p.storage_of["err:s"]].tensors
    full = plan_training(build_schedule(two_branches(), "fqt", batch=batch))
    assert "errp:b" not in full.schedule.tensors
