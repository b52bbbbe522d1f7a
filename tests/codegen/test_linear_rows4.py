"""Linear layers of DSP inference exports (`mt_linear_fwd_s8_rows4`: four weight rows interleaved,
one LDM per sixteen weights): the layout, the Flash it costs, and the C kernel against the
golden engine on the shapes that take its separate branches: an odd and an even number of
groups of four inputs, inputs not a multiple of four (a padded last group), output counts with
and without leftover rows, relu and none. Host builds run the loop through the instruction
emulation (and the reference loop on the same layout); the Cortex-M4 runs run the assembly."""

from __future__ import annotations

import numpy as np
import pytest
from test_host_runtime import assert_c_matches_engine

from conftest import needs_gcc
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.cross import build_mcu, run_mcu
from mcutrain.codegen.emit import emit_model, interleave_rows4
from mcutrain.codegen.library import export_library
from mcutrain.engines import int_engine, ptq
from mcutrain.plan.lifetimes import flash_weight_bytes
from mcutrain.targets import get_target


def test_four_rows_interleave_four_values_at_a_time():
    w = np.arange(40, dtype=np.int8).reshape(5, 8)
    got = interleave_rows4(w).reshape(-1, 4).tolist()
    assert got[:4] == [[0, 1, 2, 3], [8, 9, 10, 11], [16, 17, 18, 19], [24, 25, 26, 27]]
    assert got[4:8] == [[4, 5, 6, 7], [12, 13, 14, 15], [20, 21, 22, 23], [28, 29, 30, 31]]
    assert got[8:] == [[32, 33, 34, 35], [36, 37, 38, 39]]   # the fifth row alone


def test_rows_padded_to_fours_are_the_only_flash_cost():
    g = G.Graph((6,), [G.linear("a", G.INPUT, 5, in_features=6)])
    assert flash_weight_bytes(g, g.nodes[0], "dsp") == 5 * 8   # rows of 6 padded to 8
    assert flash_weight_bytes(g, g.nodes[0], "ref") == 30
    s = zoo.build("small-cnn")
    fc1 = next(n for n in s.nodes if n.name == "fc1")
    assert flash_weight_bytes(s, fc1, "dsp") == fc1.params["weight"].size   # 1568 inputs: no padding
    qm = ptq.quantize_model(g, np.random.default_rng(0).random((4, 6), dtype=np.float32))
    assert "mt_linear_fwd_s8_rows4(" in emit_model(qm, kernels="dsp").source
    assert "mt_linear_fwd_s8_rows4(" not in emit_model(qm, kernels="ref").source


def _mlp(feats: int, hidden: int, outs: int) -> G.Graph:
    return G.Graph((feats,), [G.linear("a", G.INPUT, hidden, act="relu", in_features=feats),
                              G.linear("b", "a", outs, in_features=hidden)], name="mlp")


CASES = {
    # name: (inputs, hidden, outputs): groups of four of each layer, leftover rows
    "5 groups, 8 rows; 2 groups, 5 rows": (20, 8, 5),
    "1 group, 7 rows; 2 groups, 3 rows": (4, 7, 3),
    "9 inputs (padded last group), 12 rows; 3 groups, 6 rows": (9, 12, 6),
    "64 groups, 16 rows": (256, 16, 4),
}


def _model(name: str):
    feats, hidden, outs = CASES[name]
    g = zoo.he_init(_mlp(feats, hidden, outs), seed=len(name))
    rng = np.random.default_rng(len(name))
    qm = ptq.quantize_model(g, rng.random((16, feats), dtype=np.float32))
    x_q = int_engine.quantize_input(qm, rng.random((3, feats), dtype=np.float32))
    return qm, x_q


@needs_gcc
@pytest.mark.parametrize("kernels", ["dsp", "ref"])
@pytest.mark.parametrize("name", list(CASES))
def test_rows4_linear_matches_the_engine_on_the_host(tmp_path, name, kernels):
    qm, x_q = _model(name)
    assert_c_matches_engine(qm, x_q, tmp_path, kernels)


@pytest.mark.parametrize("name", list(CASES))
def test_rows4_assembly_is_bit_exact_on_m4(arm_tools, tmp_path, name):
    qm, x_q = _model(name)
    target = get_target("cortex-m4")
    export_library(qm, tmp_path / "lib", kernels="dsp")
    b = build_mcu(tmp_path / "lib", target, tmp_path / "m.elf", kernels="dsp")
    logits, prof = run_mcu(b.elf, target, x_q, CASES[name][2], tmp_path / "run")
    np.testing.assert_array_equal(logits, int_engine.forward(qm, x_q))
    assert prof.region.per_function.get("dot4", 0) > 0
