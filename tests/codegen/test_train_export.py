"""Generated training libraries on the host (gcc, ASan + UBSan): after every step the C library's
losses, logits, trainable weights and biases, RNG state and step counter equal the simulated
method's; the arena is the planner's; the state blob round-trips; unsupported settings are refused."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from conftest import needs_gcc
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.cfloat import c_float
from mcutrain.codegen.dispatch import emit_training
from mcutrain.codegen.emit import ExportError
from mcutrain.codegen.library import export_training_library
from mcutrain.engines import int_engine, ptq
from mcutrain.mcu.hostbuild import build_host_train
from mcutrain.mcu.hostrun import run_host_train
from mcutrain.mcu.twin import velocity
from mcutrain.methods import zo_estimator as est
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.zo import ZOConfig, ZOMethod
from mcutrain.plan.schedules import schedule_for
from mcutrain.plan.training import plan_training


def tiny_graph() -> G.Graph:
    """conv(relu) -> maxpool -> depthwise(relu6, stride 2) -> flatten -> linear."""
    nodes = [G.conv2d("conv1", G.INPUT, 3, 3, padding=1, act="relu", in_channels=2),
             G.maxpool("pool", "conv1", 2),
             G.conv2d("dw", "pool", 3, 3, stride=2, padding=(1, 1, 0, 2), groups=3, act="relu6",
                      in_channels=3),
             G.flatten("flat", "dw"),
             G.linear("fc", "flat", 4, in_features=2 * 2 * 3)]
    return zoo.he_init(G.Graph((6, 6, 2), nodes, "tiny-train"), seed=3)


def residual_graph() -> G.Graph:
    """conv(relu6) -> one inverted-residual block (pw1, depthwise, linear pw2, add) -> pool -> linear:
    the smallest graph with an MCUNet block's skip tensor (read by pw1 and the add)."""
    nodes = [G.conv2d("stem", G.INPUT, 4, 3, padding=1, act="relu6", in_channels=2),
             G.conv2d("b.pw1", "stem", 6, 1, act="relu6", in_channels=4),
             G.conv2d("b.dw", "b.pw1", 6, 3, padding=1, groups=6, act="relu6", in_channels=6),
             G.conv2d("b.pw2", "b.dw", 4, 1, in_channels=6),
             G.add("b.add", "stem", "b.pw2"),
             G.global_avgpool("pool", "b.add"), G.flatten("flat", "pool"),
             G.linear("fc", "flat", 3, in_features=4)]
    return zoo.he_init(G.Graph((5, 5, 2), nodes, "tiny-residual"), seed=3)


HAND_BUILT = {"tiny": tiny_graph, "tiny-residual": residual_graph}


def model_and_data(arch: str, steps: int, bsz: int, seed: int = 0, rounding: str = "single"):
    rng = np.random.default_rng(seed)
    g = HAND_BUILT[arch]() if arch in HAND_BUILT else zoo.build(arch, seed=1)
    x = rng.random((steps * bsz, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, g.num_classes, steps * bsz)
    for n in g.parametric():
        n.params["bias"] = rng.normal(0, 0.1, n.params["bias"].shape).astype(np.float32)
    qm = ptq.quantize_model(g, x, rounding=rounding)
    return qm, [(x[i * bsz:(i + 1) * bsz], y[i * bsz:(i + 1) * bsz]) for i in range(steps)]


def run_and_compare(tmp_path, make_method, arch: str, lr: float, steps: int = 3, bsz: int = 2,
                    rounding: str = "single", kernels: str = "ref") -> int:
    """Export, build with sanitizers, run `steps` steps; compare with a fresh method after each step.
    Returns how many weight/bias entries the steps changed (equality must not be trivial)."""
    qm, batches = model_and_data(arch, steps, bsz, rounding=rounding)
    res = export_training_library(make_method(qm), tmp_path / "lib", batch=bsz, kernels=kernels)
    src = res.model
    exe = build_host_train(tmp_path / "lib", tmp_path / "train", kernels=kernels)
    data = [(int_engine.quantize_input(qm, x), y) for x, y in batches]
    results = run_host_train(exe, data, lr, src, qm.graph.num_classes)
    sim = make_method(qm)
    first = {e.name: results[0].state[e.name] for e in src.state}
    w0 = {n: (sim.qm.weights[n].copy(), sim.qm.biases[n].copy()) for n in sim.qm.weights}
    for s, ((x, y), r) in enumerate(zip(batches, results)):
        base = int_engine.run(sim.qm, int_engine.quantize_input(sim.qm, x))
        logits = base[qm.graph.output].reshape(bsz, -1)
        np.testing.assert_array_equal(r.losses, est.per_sample_loss(sim.qm, logits, y),
                                      err_msg=f"step {s} losses")
        np.testing.assert_array_equal(r.logits, logits, err_msg=f"step {s} logits")
        sim.step(x, y, lr)
        for e in src.state:
            layer, kind = e.name.rsplit(".", 1)
            if kind == "velocity":      # float32: bit patterns, the C order is the simulator's
                want = velocity(sim, layer)
                np.testing.assert_array_equal(np.asarray(r.state[e.name], np.float32).view(np.uint32),
                                              want.view(np.uint32), err_msg=f"step {s} {e.name}")
                continue
            want = sim.qm.weights[layer] if kind == "weight" else sim.qm.biases[layer]
            np.testing.assert_array_equal(r.state[e.name], want, err_msg=f"step {s} {e.name}")
        if hasattr(sim, "rng"):
            assert r.state["rng"] == sim.rng.state, f"step {s} RNG state"
        assert r.state["steps"] == s + 1
    assert first   # something is trainable
    return sum(int(np.sum(sim.qm.weights[n] != w)) + int(np.sum(sim.qm.biases[n] != b))
               for n, (w, b) in w0.items())


ZO_CASES = [("tiny", "mix", 2.0), ("tiny", "np", 2.0), ("digits-cnn", "mix", 0.05)]


@needs_gcc
@pytest.mark.parametrize(("arch", "perturb", "lr"), ZO_CASES)
def test_zo_library_is_bit_exact_on_the_host(tmp_path, arch, perturb, lr):
    def make(qm):
        return ZOMethod(qm, ZOConfig(queries=4, perturb=perturb, seed=5))
    assert run_and_compare(tmp_path, make, arch, lr) > 0


@needs_gcc
@pytest.mark.parametrize(("arch", "momentum", "bias_last", "trainable"),
                         [("tiny", 0.9, 2, "last:1"), ("digits-cnn", 0.5, 0, "all")])
def test_bp_qas_library_matches_the_simulator_on_the_host(tmp_path, arch, momentum, bias_last, trainable):
    """Losses, logits, integer weights and biases and the float32 momentum velocity agree bit for
    bit after every step: C sums every float in the simulator's order (integer-semantics 12.6)."""
    def make(qm):
        return BPQASMethod(qm, BPQASConfig(trainable=trainable, bias_last=bias_last, momentum=momentum))
    assert run_and_compare(tmp_path, make, arch, 0.05) > 0


@needs_gcc
@pytest.mark.parametrize(("arch", "perturb", "lr"), [("tiny", "mix", 0.5), ("digits-cnn", "wp", 0.05),
                                                     ("digits-cnn", "np", 0.05)])
def test_zo_stochastic_update_rounding_is_bit_exact_on_the_host(tmp_path, arch, perturb, lr):
    """Each unit's rounding draws, kept aside before its queries, round the same weights in C."""
    def make(qm):
        return ZOMethod(qm, ZOConfig(queries=4, perturb=perturb, seed=5, update_rounding="stochastic"))
    assert run_and_compare(tmp_path, make, arch, lr) > 0


@needs_gcc
@pytest.mark.parametrize(("arch", "momentum"), [("tiny", 0.0), ("digits-cnn", 0.5)])
def test_bp_qas_stochastic_update_rounding_is_bit_exact_on_the_host(tmp_path, arch, momentum):
    def make(qm):
        return BPQASMethod(qm, BPQASConfig(trainable="all", momentum=momentum, update_rounding="stochastic",
                                           seed=7))
    assert run_and_compare(tmp_path, make, arch, 0.01) > 0


def _zo(arch: str = "digits-cnn", **kw) -> ZOMethod:
    qm, _ = model_and_data(arch, 1, 2)
    return ZOMethod(qm, ZOConfig(**{"queries": 2, "seed": 5, **kw}))


def test_arena_is_the_planners():
    m = _zo()
    src = emit_training(m, batch=2, kernels="ref")
    plan = plan_training(schedule_for(m, batch=2, kernels="ref"))
    assert src.plan.arena_bytes == plan.arena_bytes and src.plan.offsets == plan.offsets
    assert f"#define MODEL_TRAIN_ARENA_BYTES {plan.arena_bytes}" in src.header
    assert f"#define MODEL_ARENA_BYTES {max(plan.arena_bytes, src.inference_arena_bytes)}" in src.header
    for t, off in plan.offsets.items():
        assert f"(model_arena.bytes + {off})) /* {t}:" in src.source
    # trainable tensors are RAM arrays, frozen ones and requantization constants Flash
    assert "static int8_t conv1_weight[144]" in src.source
    assert "static const int32_t conv1_multiplier" in src.source


def test_frozen_layers_stay_const():
    m = _zo(trainable="last:1")
    src = emit_training(m, batch=2, kernels="ref")
    assert "static const int8_t conv1_weight[144]" in src.source
    assert "static int8_t fc_weight[5120]" in src.source
    assert [e.name for e in src.state] == ["fc.weight", "fc.bias"]
    assert src.state_bytes == 16 + 5120 + 40


def test_float_literals_are_exact():
    for v in (0.1, 1e-30, -3.5, 2.0**-140, 0.0):
        lit = c_float(v)
        assert float.fromhex(lit[:-1]) == float(np.float32(v))


@pytest.mark.parametrize(("make", "message"), [
    (lambda: _zo(mask="topk:0.5"), "mask 'topk:0.5' has no C kernels"),
    (lambda: _zo(perturb="model-wp"), "model-wp"),
    (lambda: _zo(queries=200, perturb="np"), "at most 127 queries"),
])
def test_unsupported_settings_are_refused(make, message):
    with pytest.raises(ExportError, match=message):
        emit_training(make(), batch=2)


def test_bp_channel_ratio_is_refused():
    qm, _ = model_and_data("tiny", 1, 2)
    with pytest.raises(ExportError, match="channel-ratio"):
        emit_training(BPQASMethod(qm, BPQASConfig(channel_ratio=0.5)), batch=2)


STATE_MAIN = r"""
#include <stdio.h>
#include <string.h>
#include "model.h"
static int8_t x[MODEL_TRAIN_BATCH * MODEL_INPUT_SIZE];
static int32_t y[MODEL_TRAIN_BATCH];
static int32_t l1[MODEL_TRAIN_BATCH], l2[MODEL_TRAIN_BATCH];
static uint8_t saved[MODEL_STATE_BYTES], after1[MODEL_STATE_BYTES], after2[MODEL_STATE_BYTES];
int main(void)
{
    int i;
    for (i = 0; i < MODEL_TRAIN_BATCH * MODEL_INPUT_SIZE; ++i) x[i] = (int8_t)(i * 37 % 256 - 128);
    for (i = 0; i < MODEL_TRAIN_BATCH; ++i) y[i] = i % MODEL_OUTPUT_SIZE;
    if (model_init() != MT_OK || model_save_state(saved, MODEL_STATE_BYTES) != MT_OK) return 1;
    if (model_train_step(x, y, 0.05f, l1, NULL) != MT_OK) return 2;
    model_save_state(after1, MODEL_STATE_BYTES);
    if (model_load_state(saved, MODEL_STATE_BYTES) != MT_OK || model_train_steps() != 0) return 3;
    if (model_train_step(x, y, 0.05f, l2, NULL) != MT_OK) return 4;
    model_save_state(after2, MODEL_STATE_BYTES);
    if (memcmp(after1, after2, MODEL_STATE_BYTES) != 0 || memcmp(l1, l2, sizeof(l1)) != 0) return 5;
    if (memcmp(after1, saved, MODEL_STATE_BYTES) == 0) return 6;
    saved[4] ^= 1u; /* another layout's fingerprint is refused */
    if (model_load_state(saved, MODEL_STATE_BYTES) != MT_ERR_ARG) return 7;
    if (model_load_state(saved, MODEL_STATE_BYTES - 1) != MT_ERR_ARG) return 8;
    printf("ok\n");
    return 0;
}
"""


@needs_gcc
def test_state_blob_resumes_bit_exactly(tmp_path):
    from mcutrain.buildflags import C_STD_FLAGS, HOST_SANITIZE, TRAIN_FLAGS
    lib = tmp_path / "lib"
    export_training_library(_zo(), lib, batch=2, kernels="ref")
    (lib / "harness" / "state.c").write_text(STATE_MAIN)
    cmd = [shutil.which("gcc"), *C_STD_FLAGS, *TRAIN_FLAGS, "-O1", "-DMT_KERNELS_REF", *HOST_SANITIZE,
           f"-I{lib}", f"-I{lib / 'runtime'}", str(lib / "model.c"), str(lib / "harness" / "state.c"),
           *map(str, sorted((lib / "runtime").glob("*.c"))), "-o", str(tmp_path / "state")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(tmp_path / "state")], capture_output=True, text=True)
    assert (r.returncode, r.stdout.strip()) == (0, "ok"), r.stderr


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("gcc") is None,
                    reason="needs make and gcc: apt-get install -y make gcc")
def test_training_makefile_builds_warning_free(tmp_path):
    from mcutrain.cli import main
    out = tmp_path / "lib"
    assert main(["export", "--arch", "digits-cnn", "--init", "random", "--method", "bp-qas", "--momentum",
                 "0.9", "--batch", "2", "--target", "cortex-m4", "-o", str(out)]) == 0
    r = subprocess.run(["make", "-s", "-C", str(out), "harness", "OPT=-O1", "CFLAGS_ARCH=-pedantic"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert (out / "model_train_harness").is_file() and (out / "model_harness").is_file()
    assert "-ffp-contract=off" in (out / "Makefile").read_text()
    assert "model_save_state" in (out / "README.md").read_text()
