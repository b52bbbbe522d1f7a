"""FQT partial updates (lambda_min < 1) with a batch and on residual graphs, on the host (gcc, ASan +
UBSan): each sample keeps its own top-k structures (k from its loss against the running maximum after
the whole batch's losses joined it), the batch updates their union, and the stochastic draws follow the
union's rows; after every step the C library's logits, losses and every state entry equal the simulated
`FQT`'s. The residual graph trains its depthwise and grouped convs and the layer whose output the add
sums with the block's error (the stem) partially."""

from __future__ import annotations

import numpy as np
import pytest
from test_fqt_graph import run_and_compare
from test_fqt_graph_u8 import block_graph

from conftest import needs_gcc
from mcutrain import zoo
from mcutrain.codegen.emit_fqt import emit_fqt_training
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig

PARTIAL = {"int8": "layers:stem,b0.pw1,b0.dw,g,pw,fc", "uint8": "layers:stem,b0.pw1,fc",
           "float32": "layers:stem,b0.pw1,fc"}
"""Partial layers: every trained one (the output layer too); the layer before the add trains fully
(refused: the add's other branch reads its error), uint8/float32 keep their grouped convs frozen."""


@needs_gcc
@pytest.mark.parametrize(("precision", "batch"), [("int8", 3), ("uint8", 2), ("float32", 2)])
def test_partial_updates_with_a_batch_on_a_residual_graph_equal_the_simulator(tmp_path, precision, batch):
    cfg = FQTConfig(precision=precision, seed=5, lambda_min=0.1, partial_output=True, exact_float_order=True,
                    trainable=PARTIAL[precision])
    sim = run_and_compare(tmp_path, block_graph(), cfg, steps=3, batch=batch)
    assert set(sim.decisions.partial_layers) == set(sim.trainable)


def test_a_batch_finds_its_largest_loss_before_any_backward():
    """The loss pass runs before the seeding pass; the step ORs each sample's mask into the update mask
    and runs the dense kernels on the masked errors (no kept-only kernel after the loss pass)."""
    x = np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)
    m = FQT(zoo.build("digits-cnn"), FQTConfig(precision="int8", lambda_min=0.5), x)
    src = emit_fqt_training(m, batch=4).source
    assert src.index("st = fqt_loss_pass(labels);") < src.index("st = fqt_seed(labels);")
    assert "_upd[c] |= " in src and "_keep(" not in src.split("static mt_status fqt_loss_pass")[1]
