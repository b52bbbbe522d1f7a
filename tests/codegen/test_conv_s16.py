"""Convolutions exported with int16 weights (`mt_conv2d_fwd_s8_s16`): the layout, which layers get
it, and the C kernel against the golden engine (host build, ASan + UBSan) on the cases its im2col
treats separately: tiny kernel rows, rows padded past the end of the image, borders, grouped
convs, strides, a last block of fewer than seven pixels, and both kernel builds (the DSP loops
through their instruction emulation, and the reference loop reading the widened weights)."""

from __future__ import annotations

import numpy as np
import pytest
from test_host_runtime import assert_c_matches_engine, random_qmodel

from conftest import needs_gcc
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.emit import emit_model, widen_conv_weight
from mcutrain.engines import ptq
from mcutrain.plan.lifetimes import flash_weight_bytes, widens_weights


def test_widened_layout_pads_each_kernel_row_and_swaps_the_middle_pair():
    w = np.arange(1, 13, dtype=np.int8).reshape(1, 2, 3, 2)   # two kernel rows of 3 taps x 2 channels
    assert widen_conv_weight(w).tolist() == [[[1, 3, 2, 4, 5, 0, 6, 0], [7, 9, 8, 10, 11, 0, 12, 0]]]
    assert widen_conv_weight(w).dtype == np.int16


def test_only_convs_with_short_padded_rows_are_widened():
    g = zoo.build("small-cnn")
    by = {n.name: n for n in g.nodes}
    assert widens_weights(g, by["conv1"]) and widens_weights(g, by["conv2"])
    assert not widens_weights(g, by["fc1"])
    # conv1: 16 x 3 rows of 3 weights padded to 4, int16; ref exports keep int8
    assert flash_weight_bytes(g, by["conv1"], "dsp") == 2 * 16 * 3 * 4
    assert flash_weight_bytes(g, by["conv1"], "ref") == 16 * 9
    wide = G.Graph((4, 4, 32), [G.conv2d("c", G.INPUT, 8, 3, padding=1, in_channels=32)])
    assert not widens_weights(wide, wide.nodes[0])   # 3 x 96 > 256: the int8 kernel
    dw = G.Graph((4, 4, 8), [G.conv2d("d", G.INPUT, 8, 3, padding=1, groups=8, in_channels=8)])
    assert not widens_weights(dw, dw.nodes[0])   # depthwise has its own kernel


def test_export_flash_bytes_count_the_widened_weights():
    g = zoo.build("digits-cnn")
    qm = ptq.quantize_model(g, np.random.default_rng(0).random((8, *g.input_shape), dtype=np.float32))
    dsp, ref = emit_model(qm, kernels="dsp"), emit_model(qm, kernels="ref")
    extra = sum(flash_weight_bytes(g, n, "dsp") - n.params["weight"].size for n in g.parametric())
    assert extra > 0 and dsp.const_bytes - ref.const_bytes == extra
    assert dsp.source.count("mt_conv2d_fwd_s8_s16(") == 2 and "mt_conv2d_fwd_s8_s16(" not in ref.source


CASES = {
    # (input shape, conv kwargs): what the case exercises
    "3x3 over one channel, borders, 81 pixels (last block of 4)": ((9, 9, 1), dict(out_channels=5, kernel=3,
                                                                                   padding=1)),
    "1x5 row, no padding: padded rows read up to the image end": ((5, 5, 1), dict(out_channels=3,
                                                                                 kernel=(1, 5))),
    "3 channels, stride 2, asymmetric padding": ((7, 6, 3), dict(out_channels=4, kernel=3, stride=2,
                                                                 padding=(0, 2, 1, 0))),
    "grouped, 3 channels per group (tap by tap)": ((5, 5, 6), dict(out_channels=4, kernel=3, padding=1,
                                                                    groups=2)),
    "8 channels, 2x3 kernel, whole-word taps at the borders": ((4, 5, 8), dict(out_channels=9, kernel=(2, 3),
                                                                                padding=(1, 1, 2, 1))),
}


@needs_gcc
@pytest.mark.parametrize("kernels", ["dsp", "ref"])
@pytest.mark.parametrize("case", list(CASES))
def test_widened_conv_matches_the_engine(tmp_path, case, kernels):
    shape, kw = CASES[case]
    kw = dict(kw)
    out = kw.pop("out_channels")
    g = G.Graph(shape, [G.conv2d("c", G.INPUT, out, act="relu", in_channels=shape[2], **kw),
                        G.flatten("f", "c")])
    g = G.Graph(shape, [*g.nodes, G.linear("fc", "f", 3, in_features=g.shape("f")[0])])
    assert widens_weights(g, g.nodes[0])
    rng = np.random.default_rng(len(case))
    qm = random_qmodel(g, rng)
    x_q = rng.integers(-128, 128, (2, *shape)).astype(np.int8)
    assert_c_matches_engine(qm, x_q, tmp_path, kernels)
