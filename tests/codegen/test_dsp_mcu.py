"""The native DSP assembly of the inference kernels on an emulated Cortex-M4 and M33 (QEMU), bit-exact with
the golden engine, on the shapes that take its less common branches: matrix-vector products with
an odd number of four-k groups and a tail, widened convs whose rows leave one, two or three
groups after the peeled first one, border pixels and a last block of fewer than seven pixels.
The host tests run these loops only through their portable instruction emulation."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain.codegen.cross import build_mcu, run_mcu
from mcutrain.codegen.library import export_library
from mcutrain.engines import int_engine, ptq
from mcutrain.targets import get_target


def _linear(feats: int, outs: int) -> G.Graph:
    return G.Graph((feats,), [G.linear("a", G.INPUT, outs, act="relu", in_features=feats),
                              G.linear("b", "a", 5, in_features=outs)], name="mv")


def _conv(shape: tuple[int, int, int], out: int, kernel, padding) -> G.Graph:
    c = G.conv2d("c", G.INPUT, out, kernel, 1, padding, act="relu", in_channels=shape[2])
    g = G.Graph(shape, [c, G.flatten("f", "c")])
    return G.Graph(shape, [*g.nodes, G.linear("fc", "f", 5, in_features=g.shape("f")[0])], name="cv")


GRAPHS = {
    "linear, 5 groups": _linear(20, 6),
    "linear, 1 group and 7 rows": _linear(4, 7),
    "linear, 2 groups and a tail": _linear(9, 7),
    "conv, 3x3 over 1 channel (3 groups)": _conv((6, 9, 1), 5, 3, 1),
    "conv, 3x3 over 4 channels (9 groups)": _conv((5, 5, 4), 4, 3, 1),
    "conv, 1x2 over 8 channels (4 groups)": _conv((3, 5, 8), 3, (1, 2), 0),
    "conv, 1x1 over 20 channels (5 groups)": _conv((3, 3, 20), 6, 1, 0),
}


@pytest.mark.parametrize("core", ["cortex-m4", "cortex-m33"])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_dsp_assembly_is_bit_exact(arm_tools, tmp_path, name, core):
    g = GRAPHS[name]
    rng = np.random.default_rng(len(name))
    qm = ptq.quantize_model(g, rng.random((32, *g.input_shape), dtype=np.float32))
    x_q = int_engine.quantize_input(qm, rng.random((3, *g.input_shape), dtype=np.float32))
    target = get_target(core)
    export_library(qm, tmp_path / "lib", kernels="dsp")
    b = build_mcu(tmp_path / "lib", target, tmp_path / "m.elf", kernels="dsp")
    logits, _ = run_mcu(b.elf, target, x_q, 5, tmp_path / "run")
    np.testing.assert_array_equal(logits, int_engine.forward(qm, x_q))
