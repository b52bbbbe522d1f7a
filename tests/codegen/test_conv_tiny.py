"""The tiny path of `mt_conv2d_fwd_s8_s16` (reductions of at most ten values: one pixel's column in
registers, every channel's record streamed past it): which layers take it, and the C kernel
against the golden engine on the shapes its column builder and its assembly treat separately:
3x3 over one channel (the unrolled builder), kernel rows of 1, 2, 3 and 8+1 values (half-filled
pairs packed across rows), rows of more than 16 pixels (several passes), strides, padding on
every side, a batch of two, and both requantizations (zero point -128 after a relu: SMMLA;
other zero points: SMLAL). Host builds run the loops through the instruction emulation; the
Cortex-M4 runs (QEMU) run the assembly."""

from __future__ import annotations

import numpy as np
import pytest
from test_host_runtime import assert_c_matches_engine

from conftest import needs_gcc
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.cross import build_mcu, run_mcu
from mcutrain.codegen.library import export_library
from mcutrain.engines import int_engine, ptq
from mcutrain.plan.lifetimes import runs_tiny, tiny_words, widens_weights
from mcutrain.targets import get_target


def test_tiny_columns_pack_the_half_filled_pairs():
    assert tiny_words(3, 3, 1) == 5   # 3 full pairs (x0, x2) + the 3 x1 packed into 2
    assert tiny_words(1, 5, 1) == 3   # one group of four (2 pairs) + x4 alone
    assert tiny_words(1, 1, 8) == 4   # two groups of four
    assert tiny_words(2, 1, 2) == 2   # per row (x0, -) and (x1, -): 4 halves in 2 pairs
    assert tiny_words(1, 9, 1) == 5   # 1x9: 4 full pairs + x8 alone
    assert tiny_words(2, 5, 1) == 5   # 2 x (2 full + 1 half)


def test_which_layers_take_the_tiny_path():
    g = zoo.build("small-cnn")
    by = {n.name: n for n in g.nodes}
    assert runs_tiny(g, by["conv1"]) and not runs_tiny(g, by["conv2"])   # K = 9 vs 144
    m = zoo.build("mnist1d-cnn")
    assert runs_tiny(m, m.nodes[0])   # 1x5 over one channel
    odd = G.Graph((6, 6, 1), [G.conv2d("c", G.INPUT, 6, 3, padding=1, in_channels=1)])
    assert widens_weights(odd, odd.nodes[0]) and not runs_tiny(odd, odd.nodes[0])   # O % 4 != 0
    wide = G.Graph((6, 6, 2), [G.conv2d("c", G.INPUT, 8, 3, padding=1, in_channels=2)])
    assert not runs_tiny(wide, wide.nodes[0])   # K = 18


def _conv(shape: tuple[int, int, int], out: int, act: str, **kw) -> G.Graph:
    c = G.conv2d("c", G.INPUT, out, act=act, in_channels=shape[2], **kw)
    g = G.Graph(shape, [c, G.flatten("f", "c")])
    return G.Graph(shape, [*g.nodes, G.linear("fc", "f", 3, in_features=g.shape("f")[0])], name="tiny")


CASES = {
    # name: (input shape, out channels, act, conv kwargs)
    "3x3 over 1 channel, relu, 20 wide (two passes)":
        ((5, 20, 1), 8, "relu", dict(kernel=3, padding=1)),
    "3x3 over 1 channel, no relu (SMLAL requantization)":
        ((6, 7, 1), 4, "none", dict(kernel=3, padding=1)),
    "1x5 over 1 channel, stride 2, asymmetric padding":
        ((1, 23, 1), 8, "relu", dict(kernel=(1, 5), stride=(1, 2), padding=(0, 0, 3, 1))),
    "1x1 over 8 channels":
        ((3, 4, 8), 4, "relu", dict(kernel=1)),
    "2x1 over 2 channels, stride 2 (half pairs across rows)":
        ((5, 5, 2), 12, "none", dict(kernel=(2, 1), stride=2, padding=(1, 0, 0, 1))),
    "1x9 over 1 channel (8 + 1 values a row)":
        ((2, 12, 1), 4, "relu", dict(kernel=(1, 9), padding=(0, 0, 4, 4))),
    "1x3 over 3 channels, bottom and right padding":
        ((4, 4, 3), 4, "none", dict(kernel=(1, 3), padding=(0, 2, 0, 2))),
}


def _model(name: str):
    shape, out, act, kw = CASES[name]
    g = zoo.he_init(_conv(shape, out, act, **kw), seed=len(name))
    assert runs_tiny(g, g.nodes[0]), name
    rng = np.random.default_rng(len(name))
    qm = ptq.quantize_model(g, rng.random((16, *shape), dtype=np.float32))
    x_q = int_engine.quantize_input(qm, rng.random((2, *shape), dtype=np.float32) * 1.2 - 0.1)
    return qm, x_q


@needs_gcc
@pytest.mark.parametrize("kernels", ["dsp", "ref"])
@pytest.mark.parametrize("name", list(CASES))
def test_tiny_conv_matches_the_engine_on_the_host(tmp_path, name, kernels):
    qm, x_q = _model(name)
    assert_c_matches_engine(qm, x_q, tmp_path, kernels)


@pytest.mark.parametrize("name", [n for n in CASES if "20 wide" in n or "SMLAL" in n or "1x5" in n])
def test_tiny_conv_assembly_is_bit_exact_on_m4(arm_tools, tmp_path, name):
    qm, x_q = _model(name)
    target = get_target("cortex-m4")
    export_library(qm, tmp_path / "lib", kernels="dsp")
    b = build_mcu(tmp_path / "lib", target, tmp_path / "m.elf", kernels="dsp")
    logits, prof = run_mcu(b.elf, target, x_q, 3, tmp_path / "run")
    np.testing.assert_array_equal(logits, int_engine.forward(qm, x_q))
    want = "run_fast" if "SMLAL" in name else "run_floor"   # zero point -128 after a relu: SMMLA
    assert prof.region.per_function.get(want, 0) > 0, f"{want} did not run"
