"""The general path of `mt_conv2d_fwd_s8_s16`: weight rows exported in interleaved pairs, im2col of
three pixels through the padded-row window, and the 2x3 GEMM (assembly on the Cortex-M4: the
first pair peeled, bits 0-3 of the remaining pairs, sixteen pairs per loop pass, requantization
of the six outputs inside). The C kernel against the golden engine on the shapes that take its
separate branches: pair counts leaving each bit set, an odd number of output channels (the
last row alone), a grouped conv (taps gathered), a one-pixel-wide output (three output rows
per block), a last block of one or two pixels, both requantizations (SMMLA after a relu,
SMLAL otherwise) and the general one (relu6 clamp)."""

from __future__ import annotations

import numpy as np
import pytest
from test_host_runtime import assert_c_matches_engine

from conftest import needs_gcc
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.cross import build_mcu, run_mcu
from mcutrain.codegen.emit import pair_weight_rows
from mcutrain.codegen.library import export_library
from mcutrain.engines import int_engine, ptq
from mcutrain.plan.lifetimes import runs_tiny, widens_weights
from mcutrain.targets import get_target


def test_row_pairs_interleave_two_values_at_a_time_per_group():
    w = np.arange(24, dtype=np.int16).reshape(6, 1, 4)   # 6 rows of 4, 2 groups of 3 rows
    got = pair_weight_rows(w, 2).reshape(-1, 2).tolist()
    assert got == [[0, 1], [4, 5], [2, 3], [6, 7], [8, 9], [10, 11],          # group 0: pair, then row 2
                   [12, 13], [16, 17], [14, 15], [18, 19], [20, 21], [22, 23]]  # group 1


def _conv(shape: tuple[int, int, int], out: int, act: str, **kw) -> G.Graph:
    c = G.conv2d("c", G.INPUT, out, act=act, in_channels=shape[2], **kw)
    g = G.Graph(shape, [c, G.flatten("f", "c")])
    return G.Graph(shape, [*g.nodes, G.linear("fc", "f", 3, in_features=g.shape("f")[0])], name="g3")


CASES = {
    # name: (input shape, out channels, act, conv kwargs); pairs = kh * R / 2
    "3x3 over 4 channels, 18 pairs, 25 pixels": ((5, 5, 4), 6, "relu", dict(kernel=3, padding=1)),
    "1x2 over 8 channels, 8 pairs, no relu (SMLAL)": ((3, 5, 8), 4, "none", dict(kernel=(1, 2))),
    "3x3 over 16 channels, stride 2, 5 outputs (odd row)": ((7, 6, 16), 5, "relu",
                                                            dict(kernel=3, stride=2, padding=1)),
    "grouped 3x3, 2 groups of 3 channels, 26 pixels": ((2, 13, 6), 4, "none",
                                                       dict(kernel=3, padding=(1, 1, 1, 1), groups=2)),
    "1x1 over 20 channels, one pixel wide": ((5, 1, 20), 8, "relu", dict(kernel=1)),
    "3x1 over 12 channels, relu6 (general requantization)": ((4, 3, 12), 4, "relu6",
                                                             dict(kernel=(3, 1), padding=(1, 1, 0, 0))),
    "2x2 over 32 channels, 64 pairs": ((3, 4, 32), 8, "relu", dict(kernel=2)),
}


def _model(name: str):
    shape, out, act, kw = CASES[name]
    g = zoo.he_init(_conv(shape, out, act, **kw), seed=len(name))
    assert widens_weights(g, g.nodes[0]) and not runs_tiny(g, g.nodes[0]), name
    rng = np.random.default_rng(len(name))
    qm = ptq.quantize_model(g, rng.random((16, *shape), dtype=np.float32))
    x_q = int_engine.quantize_input(qm, rng.random((2, *shape), dtype=np.float32) * 1.2 - 0.1)
    return qm, x_q


@needs_gcc
@pytest.mark.parametrize("kernels", ["dsp", "ref"])
@pytest.mark.parametrize("name", list(CASES))
def test_general_conv_matches_the_engine_on_the_host(tmp_path, name, kernels):
    qm, x_q = _model(name)
    assert_c_matches_engine(qm, x_q, tmp_path, kernels)


@pytest.mark.parametrize("name", list(CASES))
def test_gemm3_assembly_is_bit_exact_on_m4(arm_tools, tmp_path, name):
    qm, x_q = _model(name)
    target = get_target("cortex-m4")
    export_library(qm, tmp_path / "lib", kernels="dsp")
    b = build_mcu(tmp_path / "lib", target, tmp_path / "m.elf", kernels="dsp")
    logits, prof = run_mcu(b.elf, target, x_q, 3, tmp_path / "run")
    np.testing.assert_array_equal(logits, int_engine.forward(qm, x_q))
    want = {"none": "block_fast", "relu": "block_floor", "relu6": None}[CASES[name][2]]
    if want:
        assert prof.region.per_function.get(want, 0) > 0, f"{want} did not run"
