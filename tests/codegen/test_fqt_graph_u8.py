"""Generated FQT uint8 libraries (seed A's precision) on non-sequential graphs, on the host (gcc, ASan +
UBSan): depthwise and grouped convs, residual adds (a tensor read by two ops sums its errors), global
average pools. After every step the C library's logits, losses and every state entry equal the
simulated `FQT`'s, at batch 1 and with a batch (per-sample uint8 gradients summed in int16, every range
of the batch's first step from the seeding pass)."""

from __future__ import annotations

import numpy as np
import pytest
from test_fqt_graph import run_and_compare

from conftest import needs_gcc
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.emit import ExportError
from mcutrain.codegen.emit_fqt import emit_fqt_training
from mcutrain.graph import Op
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig


def block_graph() -> G.Graph:
    """stem -> inverted residual (1x1, depthwise 3x3, 1x1, add with a fused relu) -> depthwise 3x3 with a
    channel multiplier of 2 (stride 2) -> grouped 1x1 (4 channels per group) -> global average pool ->
    flatten -> linear."""
    nodes = [G.conv2d("stem", G.INPUT, 4, 3, padding=1, act="relu6", in_channels=2),
             G.conv2d("b0.pw1", "stem", 8, 1, act="relu6", in_channels=4),
             G.conv2d("b0.dw", "b0.pw1", 8, 3, padding=1, groups=8, act="relu6", in_channels=8),
             G.conv2d("b0.pw2", "b0.dw", 4, 1, in_channels=8),
             G.add("b0.add", "b0.pw2", "stem", act="relu"),
             G.conv2d("g", "b0.add", 8, 3, stride=2, padding=1, groups=4, act="relu", in_channels=4),
             G.conv2d("pw", "g", 6, 1, groups=2, act="relu6", in_channels=8),
             G.global_avgpool("gap", "pw"), G.flatten("flat", "gap"),
             G.linear("fc", "flat", 5, in_features=6)]
    return zoo.he_init(G.Graph((6, 6, 2), nodes, "u8-blocks"), seed=2)


@needs_gcc
@pytest.mark.parametrize("batch", [3])     # batch 1: tests/mcu/test_fqt_cores_mcu.py, on the M4
def test_uint8_blocks_train_bit_exactly_in_c(tmp_path, batch):
    sim = run_and_compare(tmp_path, block_graph(), FQTConfig(precision="uint8", seed=5), steps=3, batch=batch)
    ops = {n.op for n in sim.graph.nodes if sim.needs[n.name]}
    assert {Op.ADD, Op.GLOBAL_AVGPOOL} <= ops
    assert {n.attrs["groups"] for n in sim.graph.nodes if n.op == Op.CONV2D} == {1, 2, 4, 8}


def _refused(g: G.Graph, msg: str, **kw) -> None:
    x = np.random.default_rng(0).random((4, *g.input_shape), dtype=np.float32)
    with pytest.raises(ExportError, match=msg):
        emit_fqt_training(FQT(g, FQTConfig(precision="uint8", **kw), x))


def test_what_uint8_does_not_run_is_refused_with_what_to_do():
    nodes = [G.conv2d("c", G.INPUT, 4, 3, padding=1, act="relu", in_channels=1), G.avgpool("ap", "c", 2),
             G.flatten("f", "ap"), G.linear("fc", "f", 3, in_features=2 * 2 * 4)]
    _refused(zoo.he_init(G.Graph((4, 4, 1), nodes, "ap"), seed=1),
             r"node 'ap': op avgpool has no fqt uint8 C step; .*--precision int8")
    _refused(block_graph(), r"node 'b0.dw': fqt uint8 partial updates in C run on dense convs",
             lambda_min=0.5)
    wide = [G.conv2d("c", G.INPUT, 4, 1, in_channels=1), G.global_avgpool("gap", "c"), G.flatten("f", "gap"),
            G.linear("fc", "f", 3, in_features=4)]
    _refused(zoo.he_init(G.Graph((190, 190, 1), wide, "wide"), seed=1),
             r"node 'c': its uint8 weight gradient sums 36100 products")


@needs_gcc
@pytest.mark.parametrize(("precision", "batch"), [("mixed", 1), ("float32", 2)])
def test_float_error_precisions_train_the_blocks_bit_exactly_in_c(tmp_path, precision, batch):
    """mixed (uint8 forward, float32 errors) and float32: every float32 sum in the simulator's
    sequential order (exact_float_order), the residual add's errors summed in arrival order."""
    run_and_compare(tmp_path, block_graph(), FQTConfig(precision=precision, seed=5, exact_float_order=True),
                    steps=3, batch=batch)


@needs_gcc
@pytest.mark.parametrize("precision", ["uint8", "mixed", "float32"])
@pytest.mark.parametrize("batch", [1, 4])
def test_partial_layer_before_the_residual_add_trains_bit_exactly_in_c(tmp_path, precision, batch):
    """Partial updates of b0.pw2, which feeds the residual add, and of the stem below it: b0.pw2's top-k
    masks its own copy of the add's error, the skip branch (the stem's error sum) reads it unmasked."""
    cfg = FQTConfig(precision=precision, seed=5, exact_float_order=True, lambda_min=0.3,
                    trainable="layers:stem,b0.pw2,fc")
    sim = run_and_compare(tmp_path, block_graph(), cfg, steps=3, batch=batch)
    assert sim.decisions.partial_layers == ("stem", "b0.pw2")
