"""Libraries of "tflite"-rounding models on the host (gcc, ASan + UBSan): inference logits and every
layer equal the golden engine's in mode tflite (reference and DSP loops, residual ADDs and MEAN
included), ZO and BP-QAS steps equal the simulator's, and the library fixes its mode
(runtime/mt_config.h, model.c's guard) while a "single" library ships the package's runtime as is."""

from __future__ import annotations

import numpy as np
import pytest
from test_host_runtime import assert_c_matches_engine
from test_train_export import run_and_compare

from conftest import needs_gcc
from mcutrain import zoo
from mcutrain.codegen.library import export_library
from mcutrain.codegen.runtime_files import RUNTIME_DIR
from mcutrain.engines import int_engine as E
from mcutrain.engines import ptq
from mcutrain.mcu.hostbuild import HostBuildError, build_host
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.zo import ZOConfig, ZOMethod

pytestmark = needs_gcc

ZOO = [("digits-cnn", None), ("small-cnn", None), ("mnist1d-cnn", None), ("mcunet-5fps", (32, 32, 3)),
       ("mobilenet-v1-0.25", (32, 32, 1))]


def tflite_model(arch: str, shape=None):
    g = zoo.build(arch, input_shape=shape, seed=1)
    x = np.random.default_rng(2).standard_normal((12, *g.input_shape)).astype(np.float32)
    return ptq.quantize_model(g, x[:8], rounding="tflite"), x


@pytest.mark.parametrize("kernels", ["ref", "dsp"])
@pytest.mark.parametrize(("arch", "shape"), ZOO, ids=[a for a, _ in ZOO])
def test_zoo_models_in_mode_tflite(tmp_path, arch, shape, kernels):
    qm, x = tflite_model(arch, shape)
    x_q = E.quantize_input(qm, x[:4])
    single = ptq.quantize_model(qm.graph, x[:8])
    differs = (E.run(single, x_q)[qm.graph.output] != E.run(qm, x_q)[qm.graph.output]).any() or any(
        (E.run(single, x_q)[n.name] != E.run(qm, x_q)[n.name]).any() for n in qm.graph.nodes)
    assert differs, "the modes agree on this case: it would not tell them apart"
    assert_c_matches_engine(qm, x_q, tmp_path, kernels)


def test_the_library_fixes_its_mode(tmp_path):
    qm, _ = tflite_model("digits-cnn")
    export_library(qm, tmp_path / "t", kernels="ref")
    assert "#define MT_ROUNDING_TFLITE 1" in (tmp_path / "t" / "runtime" / "mt_config.h").read_text()
    assert "#if !MT_ROUNDING_TFLITE" in (tmp_path / "t" / "model.c").read_text()
    # the runtime of another mode under a tflite model.c stops the build
    default = (RUNTIME_DIR / "include" / "mt_config.h").read_text()
    (tmp_path / "t" / "runtime" / "mt_config.h").write_text(default)
    with pytest.raises(HostBuildError, match="needs the runtime exported with it"):
        build_host(tmp_path / "t", tmp_path / "t.exe")
    single = ptq.quantize_model(qm.graph, np.zeros((2, *qm.graph.input_shape), np.float32))
    export_library(single, tmp_path / "s", kernels="ref")
    assert ((tmp_path / "s" / "runtime" / "mt_config.h").read_bytes()
            == (RUNTIME_DIR / "include" / "mt_config.h").read_bytes())
    assert "MT_ROUNDING_TFLITE" not in (tmp_path / "s" / "model.c").read_text()


def test_a_conflicting_define_is_refused(tmp_path):
    qm, _ = tflite_model("digits-cnn")
    export_library(qm, tmp_path / "t", kernels="ref")
    with pytest.raises(HostBuildError, match="MT_ROUNDING_TFLITE"):
        build_host(tmp_path / "t", tmp_path / "t.exe", extra=["-DMT_ROUNDING_TFLITE=0"])


@pytest.mark.parametrize("kernels", ["ref", "dsp"])
def test_zo_library_in_mode_tflite(tmp_path, kernels):
    def make(qm):
        assert qm.rounding == "tflite"
        return ZOMethod(qm, ZOConfig(queries=4, perturb="mix", seed=5))
    assert run_and_compare(tmp_path, make, "digits-cnn", 0.05, rounding="tflite", kernels=kernels) > 0


@pytest.mark.parametrize("kernels", ["ref", "dsp"])
def test_bp_qas_library_in_mode_tflite(tmp_path, kernels):
    def make(qm):
        return BPQASMethod(qm, BPQASConfig(trainable="all", bias_last=0, momentum=0.5))
    assert run_and_compare(tmp_path, make, "digits-cnn", 0.05, rounding="tflite", kernels=kernels) > 0


