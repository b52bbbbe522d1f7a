"""The depthwise DSP twins' native assembly on an emulated Cortex-M4 (QEMU): int8 inference and a
whole FQT int8 training step (forward with extremes, error propagation, weight gradient) bit-exact
with the golden engine and the simulated `FQT`, on one MobileNet-style graph whose depthwise
layers have a channel count that is no multiple of four, stride 1 and 2, and 3x3 and 5x5 kernels.
The host tests (test_depthwise_dsp.py) run the same loops through their portable emulation.
Needs the ARM cross toolchain and QEMU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.cross import build_mcu, build_mcu_train, run_mcu, run_mcu_train
from mcutrain.codegen.emit_fqt import quantize_input
from mcutrain.codegen.library import export_library, export_training_library
from mcutrain.codegen.runtime_files import runtime_files
from mcutrain.engines import int_engine, ptq
from mcutrain.mcu.qemu import run_elf
from mcutrain.mcu.toolchain import build
from mcutrain.mcu.twin import first_mismatch, simulate_fqt_steps
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig

CORE = "cortex-m4"
TWINS = ("dw_rows_quad", "dw_range_quad", "bis_quads", "bip_quads", "bwp_quads")
"""The DSP loops' out-of-line functions: each must have run (the per-function profile). The graph's
depthwise output rows are four pixels wide, which the inference forward's row body takes and the
forward with extremes leaves to the quad loop (the inference quad loop runs on narrower rows in
test_depthwise_forward_rows_are_bit_exact_on_the_m4); its 3x3 stride-2 layer takes the error
propagation's stride-2 body and its 4x4 map the plane bodies of both backward kernels (their quad
loops, the error propagation's row body and the weight gradient's pair loop run in the driver's
larger shapes below)."""


def _graph() -> G.Graph:
    """conv 3x3 -> dw 3x3 stride 2 (6 channels) -> pw 1x1 -> dw 5x5 (6 channels) -> flatten -> linear."""
    nodes = [G.conv2d("stem", G.INPUT, 6, 3, 1, 1, act="relu", in_channels=2),
             G.conv2d("dw1", "stem", 6, 3, 2, 1, groups=6, act="relu6", in_channels=6),
             G.conv2d("pw", "dw1", 6, 1, 1, 0, act="relu", in_channels=6),
             G.conv2d("dw2", "pw", 6, 5, 1, 2, groups=6, act="relu", in_channels=6),
             G.flatten("f", "dw2")]
    feats = G.Graph((8, 8, 2), nodes).shape("f")[0]
    nodes.append(G.linear("fc", "f", 5, in_features=feats))
    return zoo.he_init(G.Graph((8, 8, 2), nodes, "dwnet"), seed=4)


@pytest.fixture(scope="module")
def model():
    g = _graph()
    rng = np.random.default_rng(7)
    x = rng.random((4, *g.input_shape), dtype=np.float32)
    return ptq.quantize_model(g, rng.random((32, *g.input_shape), dtype=np.float32)), x


def test_depthwise_inference_is_bit_exact_on_the_m4(arm_tools, tmp_path, model):
    qm, x = model
    x_q = int_engine.quantize_input(qm, x[:2])
    export_library(qm, tmp_path / "lib", kernels="dsp")
    b = build_mcu(tmp_path / "lib", CORE, tmp_path / "m.elf", kernels="dsp")
    logits, prof = run_mcu(b.elf, CORE, x_q, 5, tmp_path / "run")
    np.testing.assert_array_equal(logits, int_engine.forward(qm, x_q))
    assert any(f.startswith(TWINS[0]) for f in prof.region.per_function), "the DSP depthwise forward ran"


def test_depthwise_fqt_step_is_bit_exact_on_the_m4(arm_tools, tmp_path, model):
    qm, x = model
    cfg = FQTConfig(precision="int8", trainable="all", seed=3)
    batches = [(x[:1], np.array([3]))]
    res = export_training_library(FQT(qm, cfg, x[:1]), tmp_path / "lib", batch=1, kernels="dsp")
    b = build_mcu_train(tmp_path / "lib", CORE, tmp_path / "t.elf", kernels="dsp")
    data = [(quantize_input(FQT(qm, cfg, x[:1]), bx), by) for bx, by in batches]
    mcu, prof, _ = run_mcu_train(b.elf, CORE, data, 0.05, res.model, 5, tmp_path / "run", timeout=600)
    assert first_mismatch(simulate_fqt_steps(FQT(qm, cfg, x[:1]), batches, 0.05, res.model), mcu) == ""
    ran = prof.region.per_function
    missing = [f for f in TWINS[1:] if not any(k.startswith(f) for k in ran)]
    assert missing == [], "every DSP depthwise loop of the step ran"


DRIVER = Path(__file__).parent / "drivers" / "depthwise_kernels.c"
ERROR_ARGS = {  # kind 2, 5 or 6: n h w c kh kw stride pad z_x z_y act_min act_max shift_lo shift_hi seed
    "3x3 stride 1 on a 9x9 map (interior rows of three taps)":
        [2, 1, 9, 9, 8, 3, 3, 1, 1, 0, 0, -128, 127, -20, -18, 1],
    "5x5 stride 1 on an 8x11 map (interior rows of five taps)":
        [2, 1, 8, 11, 4, 5, 5, 1, 2, 0, 0, -128, 127, -22, -20, 2],
    "3x3 stride 2 on a 12x12 map (the stride-2 body)":
        [2, 1, 12, 12, 8, 3, 3, 2, 1, 0, 0, -128, 127, -20, -18, 3],
    "7x7 stride 2 on a 16x14 map (the stride-2 body)":
        [2, 1, 16, 14, 4, 7, 7, 2, 3, 0, 0, -128, 127, -22, -20, 4],
    # the plane body of small maps: its native sums (4x4 and 2x2 maps at stride 1, 4x4 at stride 2),
    # then its C loop
    "plane body: 3x3 on a 4x4 map, batch 2, 6 channels":
        [2, 2, 4, 4, 6, 3, 3, 1, 1, 0, 0, -128, 127, -20, -18, 5],
    "plane body: 7x7 on a 4x4 map": [2, 1, 4, 4, 8, 7, 7, 1, 3, 0, 0, -128, 127, -22, -20, 6],
    "plane body: 5x5 on a 2x2 map, batch 2": [2, 2, 2, 2, 8, 5, 5, 1, 2, 0, 0, -128, 127, -22, -20, 7],
    "plane body: 3x3 stride 2 on a 4x4 map": [2, 1, 4, 4, 4, 3, 3, 2, 1, 0, 0, -128, 127, -20, -18, 8],
    "plane body: 7x7 stride 2 on a 4x4 map, 5 channels":
        [2, 1, 4, 4, 5, 7, 7, 2, 3, 0, 0, -128, 127, -22, -20, 9],
    "plane body, C loop: 3x3 on a 4x3 map (odd width)":
        [2, 1, 4, 3, 4, 3, 3, 1, 1, 0, 0, -128, 127, -20, -18, 10],
    "plane body, range pass: 5x5 on a 4x4 map": [5, 1, 4, 4, 8, 5, 5, 1, 2, 0, 0, -128, 127, -22, -20, 11],
    "plane body, range pass: 3x3 on a 2x2 map": [5, 2, 2, 2, 4, 3, 3, 1, 1, 0, 0, -128, 127, -20, -18, 12],
    # one output, one tap at stride 1 up to 5x5: the quad loop (the plane body costs more there)
    "quad loop: 3x3 on a 1x1 map, batch 2": [2, 2, 1, 1, 8, 3, 3, 1, 1, 0, 0, -128, 127, -20, -18, 25],
    "quad loop, range pass: 5x5 on a 1x1 map": [5, 1, 1, 1, 8, 5, 5, 1, 2, 0, 0, -128, 127, -22, -20, 26],
    "plane body: 7x7 on a 1x1 map": [2, 1, 1, 1, 4, 7, 7, 1, 3, 0, 0, -128, 127, -22, -20, 27],
    "plane body: 7x7 stride 2 on a 2x2 map (one output)":
        [2, 1, 2, 2, 8, 7, 7, 2, 3, 0, 0, -128, 127, -22, -20, 28],
    "quad loop: 5x5 stride 1 on a 6x40 map (rows over the row body's ring)":
        [2, 1, 6, 40, 4, 5, 5, 1, 2, 0, 0, -128, 127, -22, -20, 20],
    "quad loop: 3x3 stride 2 without padding": [2, 1, 9, 11, 4, 3, 3, 2, 0, 0, 0, -128, 127, -20, -18, 21],
    "stride-2 body, range pass: 7x7 stride 2 on a 16x14 map":
        [5, 1, 16, 14, 4, 7, 7, 2, 3, 0, 0, -128, 127, -22, -20, 22],
    "stride-2 body: 5x5 stride 2 on a 9x10 map, batch 2":
        [2, 2, 9, 10, 8, 5, 5, 2, 2, 0, 0, -128, 127, -22, -20, 23],
    "quad loop, range pass: 5x5 stride 2 without padding":
        [5, 1, 9, 9, 4, 5, 5, 2, 0, 0, 0, -128, 127, -22, -20, 24],
    "3x3 stride 2 on a 7x9 map, batch 2": [2, 2, 7, 9, 4, 3, 3, 2, 1, 0, 0, -128, 127, -20, -18, 19],
    # the stride-2 body's assembly rows (input pairs a multiple of four), setting and adding
    "stride-2 body, whole steps: 7x7 stride 2 on a 12x16 map":
        [2, 1, 12, 16, 8, 7, 7, 2, 3, 0, 0, -128, 127, -22, -20, 25],
    "stride-2 body, range pass, whole steps: 5x5 stride 2 on an 8x8 map, batch 2":
        [5, 2, 8, 8, 4, 5, 5, 2, 2, 0, 0, -128, 127, -22, -20, 26],
    "stride-2 body, whole steps: 5x5 stride 2 on a 6x24 map, 6 channels":
        [2, 1, 6, 24, 6, 5, 5, 2, 2, 0, 0, -128, 127, -22, -20, 27],
    "range pass: 3x3 stride 2 on a 12x12 map": [5, 1, 12, 12, 8, 3, 3, 2, 1, 0, 0, -128, 127, -20, -18, 13],
    # the row body of stride 1 (rows of more than four inputs; the first two cases above take it too)
    "row body: 7x7 on an 8x8 map, batch 2, 6 channels":
        [2, 2, 8, 8, 6, 7, 7, 1, 3, 0, 0, -128, 127, -22, -20, 14],
    "row body: 3x3 on a 6x7 map, no padding": [2, 1, 6, 7, 4, 3, 3, 1, 0, 0, 0, -128, 127, -20, -18, 15],
    "row body, range pass: 3x3 on a 9x9 map, batch 2":
        [5, 2, 9, 9, 8, 3, 3, 1, 1, 0, 0, -128, 127, -20, -18, 16],
    "row body: 3x3 on a 4x21 map (two chunks of inputs)":
        [2, 1, 4, 21, 4, 3, 3, 1, 1, 0, 0, -128, 127, -20, -18, 18],
    "row body, range pass: 5x5 on an 8x11 map": [5, 1, 8, 11, 4, 5, 5, 1, 2, 0, 0, -128, 127, -22, -20, 17],
    # kind 6: a multiplier with five trailing zero bits, the output stage's SMLAL form (else SMMLA)
    "SMLAL output stage: row body, 3x3 on a 9x9 map":
        [6, 1, 9, 9, 8, 3, 3, 1, 1, 0, 0, -128, 127, -20, -18, 28],
    "SMLAL output stage: plane body, 3x3 on a 4x4 map":
        [6, 1, 4, 4, 8, 3, 3, 1, 1, 0, 0, -128, 127, -20, -18, 29],
    "SMLAL output stage: stride-2 body, 3x3 on a 12x12 map":
        [6, 1, 12, 12, 8, 3, 3, 2, 1, 0, 0, -128, 127, -20, -18, 30],
    # error shifts of -14 / -13: about a third of the errors clamped to -127 / 127 (SSAT, then -128 raised)
    "saturating: row body, 3x3 on a 9x9 map": [2, 1, 9, 9, 8, 3, 3, 1, 1, 0, 0, -128, 127, -14, -13, 31],
    "saturating, SMLAL: plane body, 5x5 on a 4x4 map":
        [6, 1, 4, 4, 8, 5, 5, 1, 2, 0, 0, -128, 127, -14, -13, 32],
    "saturating: stride-2 body, 3x3 on a 12x12 map":
        [2, 1, 12, 12, 8, 3, 3, 2, 1, 0, 0, -128, 127, -14, -13, 33],
}


WEIGHT_ARGS = {  # kind 3: n h w c kh kw stride pad z_x z_y act_min act_max shift_lo shift_hi seed
    "3x3 stride 1 on a 9x9 map, 8 channels (odd row width: odd tap ends)":
        [3, 1, 9, 9, 8, 3, 3, 1, 1, -128, 0, -128, 127, -12, -6, 1],
    "3x3 stride 2 on a 12x11 map, batch 2, 6 channels (a channel tail)":
        [3, 2, 12, 11, 6, 3, 3, 2, 1, 5, 0, -128, 127, -12, -6, 2],
    "5x5 stride 1 on a 6x40 map (two error blocks per row), zero point 17":
        [3, 1, 6, 40, 4, 5, 5, 1, 2, 17, 0, -128, 127, -12, -6, 3],
    "7x7 stride 2 on a 16x14 map, 12 channels": [3, 1, 16, 14, 12, 7, 7, 2, 3, 0, 0, -128, 127, -12, -6, 4],
    "5x5 on a 2x2 map (most taps only see padding), 9 channels":
        [3, 2, 2, 2, 9, 5, 5, 1, 2, -128, 0, -128, 127, -12, -6, 5],
    # the plane body's native tap rows (4x4 outputs one channel a call, 2x2 the quad), then its C loop
    "plane body: 3x3 on a 4x4 map, batch 2, 6 channels":
        [3, 2, 4, 4, 6, 3, 3, 1, 1, 9, 0, -128, 127, -12, -6, 6],
    "plane body: 5x5 on a 4x4 map": [3, 1, 4, 4, 8, 5, 5, 1, 2, -128, 0, -128, 127, -12, -6, 7],
    "plane body: 7x7 on a 4x4 map": [3, 1, 4, 4, 4, 7, 7, 1, 3, -3, 0, -128, 127, -12, -6, 8],
    "plane body: 3x3 stride 2 on an 8x8 map, 5 channels":
        [3, 1, 8, 8, 5, 3, 3, 2, 1, -128, 0, -128, 127, -12, -6, 9],
    "plane body: 3x3 on a 2x2 map, batch 2": [3, 2, 2, 2, 8, 3, 3, 1, 1, 40, 0, -128, 127, -12, -6, 10],
    "plane body: 7x7 on a 2x2 map": [3, 1, 2, 2, 4, 7, 7, 1, 3, -128, 0, -128, 127, -12, -6, 11],
    "plane body: 3x3 stride 2 on a 4x4 map": [3, 1, 4, 4, 4, 3, 3, 2, 1, -128, 0, -128, 127, -12, -6, 12],
    "plane body: 5x5 stride 2 on a 4x4 map, 7 channels":
        [3, 1, 4, 4, 7, 5, 5, 2, 2, 0, 0, -128, 127, -12, -6, 13],
    "plane body: 7x7 stride 2 on a 3x4 map": [3, 2, 3, 4, 8, 7, 7, 2, 3, -128, 0, -128, 127, -12, -6, 14],
    "plane body: 3x3 on a 4x3 map (odd width: a zero partner)":
        [3, 1, 4, 3, 4, 3, 3, 1, 1, -128, 0, -128, 127, -12, -6, 15],
    "plane body, C loop: 3x3 on a 3x3 map": [3, 1, 3, 3, 8, 3, 3, 1, 1, 5, 0, -128, 127, -12, -6, 16],
    # one output position: the quad loop (the plane body costs twice as much there)
    "quad loop: 5x5 on a 1x1 map, batch 2": [3, 2, 1, 1, 8, 5, 5, 1, 2, -128, 0, -128, 127, -12, -6, 17],
    "quad loop: 7x7 stride 2 on a 2x2 map (one output)":
        [3, 1, 2, 2, 6, 7, 7, 2, 3, 0, 0, -128, 127, -12, -6, 18],
}


FORWARD_ARGS = {  # kinds 0 and 1: n h w c kh kw stride pad z_x z_y act_min act_max shift_lo shift_hi seed
    "3x3 stride 1, batch 2, a relu6-like act_max":
        [1, 2, 9, 10, 8, 3, 3, 1, 1, -128, -128, -128, 50, -12, -6, 1],
    "3x3 stride 2, odd width, output zero point 5":
        [0, 1, 11, 13, 8, 3, 3, 2, 1, 7, 5, -128, 127, -12, -6, 2],
    "5x5 stride 1 on a 3x9 map": [1, 1, 3, 9, 4, 5, 5, 1, 2, -20, -128, -128, 127, -12, -6, 3],
    "7x7 stride 2, batch 2": [0, 2, 12, 11, 12, 7, 7, 2, 3, -128, -128, -128, 127, -12, -6, 4],
    "3x3 stride 1 on a 3x3 map (rows of three pixels: the quad loop)":
        [0, 1, 3, 3, 8, 3, 3, 1, 1, -128, -128, -128, 60, -12, -6, 5],
    "5x5 stride 1 on a 4x4 map, output zero point 3 (the inference row body's widest case of one group)":
        [0, 1, 4, 4, 8, 5, 5, 1, 2, 9, 3, -128, 127, -12, -6, 6],
}


@pytest.fixture(scope="module")
def driver_elfs(arm_tools, tmp_path_factory) -> dict[str, Path]:
    """The seeded kernel driver built for the M4 against the reference kernels and the DSP twins."""
    root = tmp_path_factory.mktemp("dw_m4")
    rt = root / "rt"
    rt.mkdir()
    for name, text in runtime_files("dsp", training=True).items():
        (rt / name).write_text(text)
    return {k: build([DRIVER], CORE, root / f"{k}.elf", include_dirs=[rt], defines=d,
                     heap_bytes=64 * 1024).elf
            for k, d in (("ref", ["MT_KERNELS_REF"]), ("dsp", []))}


@pytest.mark.parametrize("kernel, cases",
                         [("error propagation", ERROR_ARGS), ("weight gradient", WEIGHT_ARGS)])
def test_depthwise_backward_kernels_are_bit_exact_on_the_m4(driver_elfs, kernel, cases):
    """The backward kernels' native assembly against the reference kernel, both run on the M4: whole
    kernel rows of interior inputs at strides 1 and 2 for the error propagation, odd tap ends,
    several error blocks per row, channel tails and batches for the weight gradient (shapes the
    graph above is too small to have)."""
    for what, args in cases.items():
        ref, dsp = (run_elf(driver_elfs[k], CORE, [str(a) for a in args]).stdout for k in ("ref", "dsp"))
        assert "status 0" in ref and dsp == ref, f"{what}: the native DSP {kernel} differs"


def test_depthwise_forward_rows_are_bit_exact_on_the_m4(driver_elfs):
    """The forward's row body in its native assembly (inference and with extremes) against the reference."""
    for what, args in FORWARD_ARGS.items():
        ref, dsp = (run_elf(driver_elfs[k], CORE, [str(a) for a in args]).stdout for k in ("ref", "dsp"))
        assert "status 0" in ref and dsp == ref, f"{what}: the native DSP forward differs"

