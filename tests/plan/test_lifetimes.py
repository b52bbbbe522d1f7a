"""Forward-pass lifetimes, in-place storage sharing, scratch sizes and the planned arena."""

from __future__ import annotations

import itertools

import numpy as np

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.plan import plan_inference_arena
from mcutrain.plan.lifetimes import forward_lifetimes, scratch_bytes, tiny_words, widens_inference_weights


def residual_graph() -> G.Graph:
    return G.Graph((4, 4, 2), [
        G.conv2d("a", G.INPUT, 2, 3, padding=1, in_channels=2),       # step 0
        G.conv2d("b", "a", 2, 1, in_channels=2),                      # step 1
        G.add("sum", "a", "b", act="relu"),                            # step 2: a and b die here
        G.relu6("r6", "sum"),                                          # step 3: in place on sum
        G.flatten("flat", "r6"),                                       # step 4: alias
        G.linear("fc", "flat", 3, in_features=32),                     # step 5
    ])


def test_digits_cnn_lifetimes_by_hand():
    lt = forward_lifetimes(zoo.build("digits-cnn"), kernels="ref")
    got = [(s.name, s.size, s.first_use, s.last_use, s.tensors) for s in lt.storages]
    assert got == [("input", 64, 0, 0, ["input"]),
                   ("conv1", 8 * 8 * 16, 0, 1, ["conv1"]),
                   ("conv2", 4 * 4 * 32, 1, 3, ["conv2", "flatten"]),
                   ("fc", 10, 3, 3, ["fc"])]


def test_in_place_add_relu_and_flatten_alias():
    lt = forward_lifetimes(residual_graph(), kernels="ref")
    st = {s.name: s for s in lt.storages}
    assert st["a"].tensors == ["a", "sum", "r6", "flat"]   # add took over a, relu6 and flatten follow
    assert (st["a"].first_use, st["a"].last_use) == (0, 5)
    assert lt.storage_of["b"] != lt.storage_of["sum"]
    p = plan_inference_arena(residual_graph(), kernels="ref")
    assert p.offsets["sum"] == p.offsets["a"] == p.offsets["flat"]


def test_no_in_place_when_the_input_is_read_later():
    g = G.Graph((4,), [G.linear("a", G.INPUT, 4, in_features=4), G.relu("r", "a"),
                       G.add("s", "a", "r")])   # 'a' is read again at step 2: relu cannot overwrite it
    lt = forward_lifetimes(g, kernels="ref")
    assert lt.storage_of["r"] != lt.storage_of["a"]
    assert lt.storage_of["s"] == lt.storage_of["a"]   # at the add both inputs die: takes the first


def test_scratch_sizes_mirror_the_c_companions():
    g = zoo.build("mcunet-5fps", input_shape=(32, 32, 3))
    for n in g.nodes:
        ref, dsp = scratch_bytes(g, n, "ref"), scratch_bytes(g, n, "dsp")
        assert ref == 0
        if n.op == G.Op.LINEAR:
            assert dsp == 2 * n.params["weight"].shape[1]
        elif n.op == G.Op.CONV2D and n.attrs["groups"] == 1:
            k = int(np.prod(n.params["weight"].shape[1:]))
            cg = n.params["weight"].shape[3]
            cols = 7 if k <= 256 else 2   # the 1x7 GEMM block, or 2x2 for long reductions
            s8 = 2 * cols * k + (2 * k if cg % 4 else 0)   # the stem has 3 channels
            o, kh, kw, _ = n.params["weight"].shape
            kp = kh * ((kw * cg + 3) // 4 * 4)   # int16 weights: kernel rows padded to fours
            if kp <= 256:   # mt_conv2d_fwd_s8_s16 (inference) or mt_conv2d_fwd_s8 (RAM weights)
                c, (out_h, out_w) = g.shape(n.inputs[0])[-1], g.shape(n.name)[:2]
                (sh, sw) = n.attrs["stride"]
                row = (((out_w - 1) * sw + kw) * c + 6) // 4 * 4   # a padded input row
                # the general path: a window of the rows a block of 3 pixels spans, 3 columns,
                # 16 bytes of constants per channel, a short last block's outputs
                slots = min(kh + sh * (2 if out_w == 1 else 1), (out_h - 1) * sh + kh)
                s16 = slots * row + 6 * kp + 16 * o + (3 * o + 3) // 4 * 4
                if k <= 10 and o % 4 == 0 and tiny_words(kh, kw, cg) <= 5:
                    # the tiny path: records of 9 words per channel, columns of 16 pixels, a
                    # window of kh padded rows stored twice
                    s16 = max(s16, 36 * o + 320 + 2 * kh * row)
                assert dsp == max(s8, s16), n.name
                assert scratch_bytes(g, n, "dsp", widened=False) == s8, n.name
            else:
                assert dsp == s8, n.name
        else:
            assert dsp == 0, n.name   # depthwise, pools, add: no scratch


def test_linear_plan_keeps_every_tensor_apart():
    g = residual_graph()
    p = plan_inference_arena(g, kernels="dsp", planner="linear")
    spans = sorted((off, off + int(np.prod(g.shape(t)))) for t, off in p.offsets.items() if t != "flat")
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    greedy = plan_inference_arena(g, kernels="dsp")
    assert greedy.arena_bytes < p.arena_bytes


def test_small_cnn_arena_is_the_two_largest_neighbours():
    g = zoo.build("small-cnn")
    p = plan_inference_arena(g, kernels="ref")
    # conv1 out (28*28*16) and pool1 out (14*14*16) are alive together at step 1: the peak
    assert p.arena_bytes == 28 * 28 * 16 + 14 * 14 * 16


def test_only_a_dsp_build_for_a_core_without_helium_widens_inference_weights():
    assert widens_inference_weights("dsp", "cortex-m4") and widens_inference_weights("dsp", "stm32f746")
    assert widens_inference_weights("dsp")                    # any core: the M4/M7 layout
    assert not widens_inference_weights("dsp", "cortex-m55")
    assert not widens_inference_weights("ref", "cortex-m4")
