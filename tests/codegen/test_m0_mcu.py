"""The ARMv6-M twins (runtime/m0/) on an emulated Cortex-M0+ (QEMU mps2-an385), bit-exact with the
golden engine, one network per case: the first layer's one input channel (the window patch), odd
output counts (the channel tail of the four-channel dot product), stride 2 with padding, long row
runs over 16 channels, a one-row kernel, a grouped conv (the reference body), 2x2 and 3x3 stride-2
max pooling and a linear tail, in both rounding modes; and RV32IMC, which runs the twins' portable
C. Plus one FQT int8 step at batch 2 through the training twins (forward with ranges, error
propagation, weight gradients), bit-exact with the simulated `FQT` after every step.
Needs the ARM (and RISC-V) cross toolchains and QEMU."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.cross import build_mcu, build_mcu_train, run_mcu, run_mcu_train
from mcutrain.codegen.emit_fqt import quantize_input
from mcutrain.codegen.library import export_library, export_training_library
from mcutrain.engines import int_engine, ptq
from mcutrain.mcu.twin import first_mismatch, simulate_fqt_steps
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig


def _net(shape: tuple[int, int, int], layers: list[G.Node]) -> G.Graph:
    g = G.Graph(shape, [*layers, G.flatten("f", layers[-1].name)])
    return G.Graph(shape, [*g.nodes, G.linear("fc", "f", 5, in_features=g.shape("f")[0])], name="m0")


GRAPHS = {
    "conv 3x3 over 1 channel, 5 outputs, padding, maxpool 2x2": ("single", _net((9, 8, 1), [
        G.conv2d("c", G.INPUT, 5, 3, padding=1, act="relu", in_channels=1), G.maxpool("p", "c", 2)])),
    "conv 3x3 stride 2 over 3 channels, 7 outputs, padding": ("tflite", _net((7, 6, 3), [
        G.conv2d("c", G.INPUT, 7, 3, stride=2, padding=1, act="relu", in_channels=3)])),
    "conv 3x3 over 16 channels (row runs), 6 outputs, maxpool 3x3 stride 2": ("single", _net((6, 7, 16), [
        G.conv2d("c", G.INPUT, 6, 3, padding=1, act="relu", in_channels=16), G.maxpool("p", "c", 3, 2)])),
    "conv 1x5 over 1 channel, padding, relu6, then no activation": ("tflite", _net((1, 12, 1), [
        G.conv2d("c", G.INPUT, 9, (1, 5), padding=(0, 2), act="relu6", in_channels=1),
        G.conv2d("d", "c", 3, (1, 3), act="none", in_channels=9)])),
    "conv grouped (reference body)": ("single", _net((4, 4, 4), [
        G.conv2d("c", G.INPUT, 6, 3, padding=1, groups=2, act="relu", in_channels=4)])),
}


def _model(name: str):
    rounding, g = GRAPHS[name]
    rng = np.random.default_rng(len(name))
    qm = ptq.quantize_model(g, rng.random((32, *g.input_shape), dtype=np.float32), rounding=rounding)
    return qm, int_engine.quantize_input(qm, rng.random((2, *g.input_shape), dtype=np.float32))


@pytest.mark.parametrize("name", list(GRAPHS))
def test_m0_twins_are_bit_exact_on_the_m0plus(arm_tools, tmp_path, name):
    qm, x_q = _model(name)
    res = export_library(qm, tmp_path / "lib", kernels="ref", target="cortex-m0plus")
    assert "runtime/mt_m0.h" in res.files
    b = build_mcu(tmp_path / "lib", "cortex-m0plus", tmp_path / "m.elf", kernels="ref")
    logits, prof = run_mcu(b.elf, "cortex-m0plus", x_q, 5, tmp_path / "run")
    np.testing.assert_array_equal(logits, int_engine.forward(qm, x_q))
    assert prof.region.per_function.get("mt_m0_dot4_run", 0) > 0, "the Thumb-1 dot product ran"
    if "grouped" not in name:   # the reference body keeps its 64-bit multiply
        assert not {"__muldi3", "__aeabi_lmul"} & set(prof.region.per_function)


def test_only_a_reference_build_for_an_m0_core_ships_the_twins(tmp_path):
    qm, _ = _model("conv 3x3 over 1 channel, 5 outputs, padding, maxpool 2x2")
    for target, kernels in (("", "ref"), ("cortex-m4", "ref"), ("cortex-m4", "dsp"), ("cortex-m7", "ref")):
        res = export_library(qm, tmp_path / f"{target or 'any'}-{kernels}", kernels=kernels, target=target)
        assert "runtime/mt_m0.h" not in res.files
    for target in ("rp2040", "rv32imc", "esp32c3"):
        res = export_library(qm, tmp_path / target, kernels="ref", target=target)
        assert "ARMv6-M" in (res.out_dir / "runtime" / "mt_conv2d_fwd_s8.c").read_text()


def test_m0_twins_are_bit_exact_on_rv32imc(riscv_tools, tmp_path):
    """RISC-V runs the twins' portable C (no Thumb-1 assembly there)."""
    qm, x_q = _model("conv 3x3 stride 2 over 3 channels, 7 outputs, padding")
    export_library(qm, tmp_path / "lib", kernels="ref", target="rv32imc")
    b = build_mcu(tmp_path / "lib", "rv32imc", tmp_path / "m.elf", kernels="ref")
    logits, _ = run_mcu(b.elf, "rv32imc", x_q, 5, tmp_path / "run")
    np.testing.assert_array_equal(logits, int_engine.forward(qm, x_q))



FQT_TWINS = ("mt_m0_dot4_run", "mt_m0_col4_run")
"""The Thumb-1 loops an FQT int8 step of every layer runs on the M0+: the forward with ranges' dot
product and the error propagation's four-column sum (no reference file has either)."""


@pytest.mark.parametrize("core", ["cortex-m0plus", "rv32imc"])
def test_m0_fqt_int8_step_is_bit_exact_through_the_twins(request, tmp_path, core):
    """conv over 1 channel (the patch), maxpool, conv over 4 channels with 5 outputs (a channel tail),
    linear: two steps of batch 2, every layer trained; RV32IMC runs the twins' portable C."""
    request.getfixturevalue("arm_tools" if core == "cortex-m0plus" else "riscv_tools")
    layers = [G.conv2d("c1", G.INPUT, 4, 3, padding=1, act="relu", in_channels=1), G.maxpool("p", "c1", 2),
              G.conv2d("c2", "p", 5, 3, padding=1, act="relu", in_channels=4)]
    g = zoo.he_init(_net((6, 6, 1), layers), seed=1)
    cfg = FQTConfig(precision="int8", trainable="all", seed=5)
    rng = np.random.default_rng(4)
    x = rng.random((8, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, g.num_classes, 8)
    batches = [(x[4 + 2 * i:6 + 2 * i], y[4 + 2 * i:6 + 2 * i]) for i in range(2)]
    res = export_training_library(FQT(g, cfg, x[:4]), tmp_path / "lib", batch=2, kernels="ref",
                                  target=core)
    assert "ARMv6-M" in (tmp_path / "lib" / "runtime" / "mt_conv2d_bwd_in_s8_s16.c").read_text()
    b = build_mcu_train(tmp_path / "lib", core, tmp_path / "t.elf", kernels="ref")
    q = FQT(g, cfg, x[:4])
    mcu, prof, _ = run_mcu_train(b.elf, core, [(quantize_input(q, bx), by) for bx, by in batches],
                                 0.05, res.model, g.num_classes, tmp_path / "run")
    assert first_mismatch(simulate_fqt_steps(FQT(g, cfg, x[:4]), batches, 0.05, res.model), mcu) == ""
    ran = prof.region.per_function
    if core == "cortex-m0plus":
        assert all(ran.get(f, 0) > 0 for f in FQT_TWINS), {f: ran.get(f, 0) for f in FQT_TWINS}
