"""The Helium (MVE) twins on an emulated Cortex-M55 (QEMU mps3-an547), bit-exact with the golden
engine in both rounding modes, on the shapes that take their less common branches: reduction
lengths below, at and above 16 with and without a tail, one input channel (the gathers, with and
without the floor requantization), odd output counts and more outputs than one prepared block
(32), border pixels, stride 2, and a grouped conv, which the twin hands to the reference body.
Needs the ARM cross toolchain and QEMU (the host test: gcc)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain.codegen.cross import build_mcu, run_mcu
from mcutrain.codegen.library import export_library
from mcutrain.engines import int_engine, ptq
from mcutrain.mcu.hostbuild import build_host
from mcutrain.mcu.hostrun import run_host

pytestmark = pytest.mark.slow  # minutes of QEMU in all: started first, beside the other modules


def _linear(feats: int, outs: int) -> G.Graph:
    return G.Graph((feats,), [G.linear("a", G.INPUT, outs, act="relu", in_features=feats),
                              G.linear("b", "a", 5, in_features=outs)], name="mv")


def _conv(shape: tuple[int, int, int], out: int, kernel, padding, stride: int = 1, groups: int = 1,
          act: str = "relu") -> G.Graph:
    c = G.conv2d("c", G.INPUT, out, kernel, stride, padding, groups=groups, act=act, in_channels=shape[2])
    g = G.Graph(shape, [c, G.flatten("f", "c")])
    return G.Graph(shape, [*g.nodes, G.linear("fc", "f", 5, in_features=g.shape("f")[0])], name="cv")


GRAPHS = {
    "linear, k 20 (one 16 and a tail), 6 outputs": _linear(20, 6),
    "linear, k 5, 7 outputs": _linear(5, 7),
    "linear, k 48 (three 16s), 37 outputs (two blocks)": _linear(48, 37),
    "conv, 3x3 over 1 channel (k 9), 5 outputs": _conv((6, 9, 1), 5, 3, 1),
    "conv, 1x5 stride 2 over 1 channel, 8 outputs, no activation": _conv((1, 21, 1), 8, (1, 5), (0, 2), 2,
                                                                         act="none"),
    "conv, 1x2 over 8 channels (k 16)": _conv((3, 5, 8), 3, (1, 2), 0),
    "conv, 3x3 over 4 channels (k 36), relu6": _conv((5, 5, 4), 4, 3, 1, act="relu6"),
    "conv, 3x3 stride 2 over 3 channels, 33 outputs": _conv((7, 6, 3), 33, 3, 1, stride=2),
    "conv, 1x1 over 20 channels, no activation": _conv((3, 3, 20), 6, 1, 0, act="none"),
    "conv, grouped (reference body)": _conv((4, 4, 4), 6, 3, 1, groups=2),
}


@pytest.mark.parametrize("rounding", ["single", "tflite"])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_mve_twins_are_bit_exact_on_m55(arm_tools, tmp_path, name, rounding):
    g = GRAPHS[name]
    rng = np.random.default_rng(len(name))
    qm = ptq.quantize_model(g, rng.random((32, *g.input_shape), dtype=np.float32), rounding=rounding)
    x_q = int_engine.quantize_input(qm, rng.random((3, *g.input_shape), dtype=np.float32))
    res = export_library(qm, tmp_path / "lib", kernels="dsp", target="cortex-m55")
    assert "runtime/mt_mve.h" in res.files
    b = build_mcu(tmp_path / "lib", "cortex-m55", tmp_path / "m.elf", kernels="dsp")
    logits, prof = run_mcu(b.elf, "cortex-m55", x_q, 5, tmp_path / "run")
    np.testing.assert_array_equal(logits, int_engine.forward(qm, x_q))
    assert any(m.startswith("vmlav") for m in prof.region.per_mnemonic), "the MVE dot product ran"


def test_other_targets_get_no_mve_file(tmp_path):
    g = GRAPHS["linear, k 5, 7 outputs"]
    qm = ptq.quantize_model(g, np.random.default_rng(0).random((8, 5), dtype=np.float32))
    for target in ("", "cortex-m4", "cortex-m7"):
        res = export_library(qm, tmp_path / (target or "any"), kernels="dsp", target=target)
        assert not any("mve" in f for f in res.files)
    helium = export_library(qm, tmp_path / "m55", kernels="dsp", target="cortex-m55")
    plain = export_library(qm, tmp_path / "m4", kernels="dsp", target="cortex-m4")
    # the Helium kernels read int8 rows as they are: no rows4 interleaving in its model.c
    assert "mt_linear_fwd_s8_rows4(" in (plain.out_dir / "model.c").read_text()
    assert "mt_linear_fwd_s8_rows4(" not in (helium.out_dir / "model.c").read_text()


@pytest.mark.parametrize("kernels", ["ref", "dsp"])
def test_a_helium_library_builds_and_is_bit_exact_on_the_host(tmp_path, kernels):
    """Away from an MVE core the twins run the reference body (`MT_MVE` 0, also under the host's
    DSP emulation), under ASan and UBSan: a Helium library builds, with the same bits, anywhere."""
    if shutil.which("gcc") is None:
        pytest.skip("needs a host C compiler: apt-get install -y gcc")
    g = GRAPHS["conv, 3x3 stride 2 over 3 channels, 33 outputs"]
    rng = np.random.default_rng(7)
    qm = ptq.quantize_model(g, rng.random((16, *g.input_shape), dtype=np.float32))
    x_q = int_engine.quantize_input(qm, rng.random((3, *g.input_shape), dtype=np.float32))
    export_library(qm, tmp_path / "lib", kernels="dsp", target="cortex-m55")
    exe = build_host(tmp_path / "lib", tmp_path / "harness.exe", kernels=kernels)
    logits, _ = run_host(exe, x_q, 5)
    np.testing.assert_array_equal(logits, int_engine.forward(qm, x_q))
