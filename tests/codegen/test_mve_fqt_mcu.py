"""The Helium (MVE) twins of the FQT int8 step on an emulated Cortex-M55 (QEMU mps3-an547): whole
training steps bit-exact with the simulated `FQT` (losses, logits, every state entry, the RNG) in
both rounding modes, batch 3, on graphs whose layers take the twins' less common branches:
reduction lengths below, at and above 16 with and without a tail, channel counts that are no
multiple of 4 or 8, one input channel, odd output counts and more outputs than one prepared block
(32), border pixels and stride 2, for the forward convs and linears with their accumulator extremes
and the error propagation of the second conv and of the linears; the one-channel forward
(`mve/mt_conv_c1.c`) over 5 channels, a tail of one; the max-pool with argmax over 33 channels.
Needs the ARM cross toolchain and QEMU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mcutrain
from mcutrain import graph as G
from mcutrain.codegen.cross import build_mcu_train, run_mcu_train
from mcutrain.codegen.emit_fqt import quantize_input
from mcutrain.codegen.library import export_training_library
from mcutrain.engines import ptq
from mcutrain.mcu.twin import first_mismatch, simulate_fqt_steps
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig

pytestmark = pytest.mark.slow  # minutes of QEMU in all: started first, beside the other modules

LR = 0.05
BATCH = 3


def _net(shape: tuple[int, int, int], c1: int, k1, c2: int, k2, stride2: int = 1, hidden: int = 0,
         pool: bool = False) -> G.Graph:
    """conv a (padding 1 for 3x3) -> ReLU -> [max-pool 2 ->] conv b (stride2) -> ReLU -> [linear hidden ->]
    linear 5."""
    a = G.conv2d("a", G.INPUT, c1, k1, 1, 1 if k1 == 3 else 0, act="relu", in_channels=shape[2])
    pooled = [G.maxpool("p", "a", 2)] if pool else []
    b = G.conv2d("b", pooled[-1].name if pool else "a", c2, k2, stride2, 1 if k2 == 3 else 0, act="relu",
                 in_channels=c1)
    nodes = [a, *pooled, b, G.flatten("f", "b")]
    feats = G.Graph(shape, nodes).shape("f")[0]
    if hidden:
        nodes += [G.linear("h", "f", hidden, act="relu", in_features=feats)]
        feats = hidden
    nodes += [G.linear("fc", nodes[-1].name, 5, in_features=feats)]
    return G.Graph(shape, nodes, name="mvefqt")


GRAPHS = {
    "one channel in (k 9), 5 then 6 outputs over k 45": _net((6, 7, 1), 5, 3, 6, 3),
    "3 channels in, 33 outputs (two blocks), max-pool, stride 2 over k 297":
        _net((7, 6, 3), 33, 3, 7, 3, stride2=2, pool=True),
    "1x1 over 20 channels (k 20), 12 then 9 outputs, hidden linear 37 over k 81":
        _net((3, 3, 20), 12, 1, 9, 1, hidden=37),
    "3x3 over 4 channels (k 36), 8 then 16 outputs over k 72": _net((5, 5, 4), 8, 3, 16, 3),
}


@pytest.mark.parametrize("rounding", ["single", "tflite"])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_fqt_int8_steps_bit_exactly_with_the_mve_twins(arm_tools, tmp_path, name, rounding):
    g = GRAPHS[name]
    rng = np.random.default_rng(len(name))
    qm = ptq.quantize_model(g, rng.random((16, *g.input_shape), dtype=np.float32), rounding=rounding)
    x = rng.random((2 * BATCH, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, 5, 2 * BATCH)
    batches = [(x[i:i + BATCH], y[i:i + BATCH]) for i in (0, BATCH)]
    cfg = FQTConfig(precision="int8", trainable="all", seed=3)
    res = export_training_library(FQT(qm, cfg, x[:1]), tmp_path / "lib", batch=BATCH, kernels="dsp",
                                  target="cortex-m55")
    assert "runtime/mt_mve_range.h" in res.files
    b = build_mcu_train(tmp_path / "lib", "cortex-m55", tmp_path / "t.elf", kernels="dsp")
    fqt = FQT(qm, cfg, x[:1])
    data = [(quantize_input(fqt, bx), by) for bx, by in batches]
    mcu, prof, _ = run_mcu_train(b.elf, "cortex-m55", data, LR, res.model, 5, tmp_path / "run", timeout=600)
    assert first_mismatch(simulate_fqt_steps(FQT(qm, cfg, x[:1]), batches, LR, res.model), mcu) == ""
    ran = prof.region.per_function
    assert "mt_mve_gemm_range" in ran, "the MVE forward ran"
    assert any(f.startswith("bwd_in_mve") for f in ran), "the MVE conv error propagation ran"
    assert any(f.startswith("linear_bwd_in_mve") for f in ran), "the MVE linear error propagation ran"
    assert "bwd_w_fill_e" in ran, "the MVE conv weight gradient ran (its errors here are all 0: skipped)"
    if any(n.op == "maxpool" for n in g.nodes):
        assert "pool_row_mve" in ran, "the MVE max-pool with argmax ran"
    if g.input_shape[2] == 1:
        assert "mt_mve_c1_dots" in ran, "the MVE one-channel forward ran"



@pytest.mark.parametrize("options", [["--batch", "4"], ["--batch", "1", "--partial", "0.3"]],
                         ids=["every filter, batch 4", "kept filters (partial updates), batch 1"])
def test_the_mve_conv_weight_gradient_sums_nonzero_errors_bit_exactly(arm_tools, tmp_path, options):
    """The graphs above quantize their conv errors to 0 (the weight gradient skips them); the digits
    CNN on digits does not, so its steps run the transposed dot products of both branches and the
    error propagation's sparse loop (nonzero errors listed, dense and kept columns)."""
    argv = ["run", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--method", "fqt",
            "--precision", "int8", *options, "--steps", "3", "--target", "cortex-m55", "--json"]
    env = {**os.environ, "PYTHONPATH": str(Path(mcutrain.__file__).parents[1])}
    r = subprocess.run([sys.executable, "-m", "mcutrain.cli", *argv], capture_output=True, text=True,
                       cwd=tmp_path, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["bit_exact"] is True, out.get("mismatch")
    assert out["per_function"].get("bwd_w_dots", 0) > 0, "nonzero conv errors reached the MVE dot products"
    assert {"bwd_in_compact", "bwd_in_list4"} <= set(out["per_function"]), \
        "the conv error propagation listed its nonzero errors (the MVE sparse loop ran)"
    one_channel = {"mt_mve_c1_dots", "c1_requant_floor"}
    assert one_channel <= set(out["per_function"]), "the MVE one-channel forward ran"
