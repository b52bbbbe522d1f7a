"""FQT steps under QEMU that only the host ran before: uint8 (seed A's precision) through a residual add,
depthwise and grouped convs and a global average pool on the Cortex-M4, and int8 with every layer
trained on the Cortex-M0+ (mps2-an385, reference kernels) on the same graph, each bit-exact with the
simulated `FQT` (losses, logits, every state entry, the RNG) after every step. One cheap configuration each,
and MCUNet-5FPS's last blocks at 32x32 with a partial layer before a residual add (int8, M4 DSP kernels).
Needs the ARM cross toolchain and QEMU."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.cross import build_mcu_train, run_mcu_train
from mcutrain.codegen.emit_fqt import quantize_input
from mcutrain.codegen.library import export_training_library
from mcutrain.graph import Graph
from mcutrain.mcu.twin import first_mismatch, simulate_fqt_steps
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig

LR = 0.05


def residual_graph() -> Graph:
    """stem -> depthwise 3x3 -> 1x1 -> add (the stem read twice) -> grouped 3x3 -> global average pool ->
    linear."""
    nodes = [G.conv2d("stem", G.INPUT, 4, 3, padding=1, act="relu6", in_channels=1),
             G.conv2d("dw", "stem", 4, 3, padding=1, groups=4, act="relu6", in_channels=4),
             G.conv2d("pw", "dw", 4, 1, in_channels=4),
             G.add("add", "pw", "stem", act="relu"),
             G.conv2d("g", "add", 4, 3, stride=2, padding=1, groups=2, act="relu", in_channels=4),
             G.global_avgpool("gap", "g"), G.flatten("flat", "gap"), G.linear("fc", "flat", 4, in_features=4)]
    return zoo.he_init(G.Graph((6, 6, 1), nodes, "u8-residual"), seed=2)


def steps_on(tmp_path, g: Graph, cfg: FQTConfig, core: str, kernels: str, steps: int = 2) -> tuple[str, str]:
    """Export, cross-build and run `steps` steps of batch 1; the first mismatch and the generated model.c."""
    rng = np.random.default_rng(3)
    x = rng.random((4 + steps, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, g.num_classes, 4 + steps)
    batches = [(x[4 + i:5 + i], y[4 + i:5 + i]) for i in range(steps)]
    lib = tmp_path / "lib"
    res = export_training_library(FQT(g, cfg, x[:4]), lib, batch=1, kernels=kernels, target=core)
    b = build_mcu_train(lib, core, tmp_path / "t.elf", kernels=kernels)
    q = FQT(g, cfg, x[:4])
    mcu, _, _ = run_mcu_train(b.elf, core, [(quantize_input(q, bx), by) for bx, by in batches], LR, res.model,
                              g.num_classes, tmp_path / "run", timeout=900)
    sim = simulate_fqt_steps(FQT(g, cfg, x[:4]), batches, LR, res.model)
    return first_mismatch(sim, mcu), (lib / "model.c").read_text()


def test_fqt_uint8_through_residual_and_depthwise_steps_bit_exactly_on_the_m4(arm_tools, tmp_path):
    mismatch, source = steps_on(tmp_path, residual_graph(), FQTConfig(precision="uint8", seed=5), "cortex-m4",
                                "dsp")
    assert mismatch == ""
    assert "mt_add_fwd_u8_range(" in source and "mt_grouped_conv2d_bwd_w_u8(" in source


def test_fqt_int8_every_layer_steps_bit_exactly_on_the_m0plus(arm_tools, tmp_path):
    g = residual_graph()
    mismatch, source = steps_on(tmp_path, g, FQTConfig(precision="int8", trainable="all", seed=5),
                                "cortex-m0plus", "ref")
    assert mismatch == ""
    assert source.count("mt_fqt_upd_s8(") == len(g.parametric())


@pytest.mark.slow
def test_fqt_int8_partial_layer_before_a_residual_add_steps_bit_exactly_on_the_m4(arm_tools, tmp_path):
    """`last:8` with partial updates: blocks.12.pw2 feeds block 12's add, whose skip (block 11's output,
    trained below) reads the add's error after it; the top-k masks the layer's own copy."""
    g = zoo.build("mcunet-5fps", num_classes=10, input_shape=(32, 32, 3), seed=0)
    cfg = FQTConfig(precision="int8", trainable="last:8", lambda_min=0.1, seed=5)
    mismatch, source = steps_on(tmp_path, g, cfg, "cortex-m4", "dsp", steps=3)
    assert mismatch == ""
    assert "memcpy(A_errp_blocks_12_pw2, A_err_blocks_12_add, 96);" in source
