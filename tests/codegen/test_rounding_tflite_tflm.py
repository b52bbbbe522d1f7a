"""The generated C of a model imported from a `.tflite` file gives exactly TensorFlow Lite Micro's
int8 outputs: the zoo models exported with `to_tflite`, imported back (rounding "tflite", what the
importer sets), as C libraries on the host (reference and DSP loops) and under QEMU on a Cortex-M0+
(reference loops), M4 and M7 (DSP assembly), against TFLM's interpreter on the same random inputs."""

from __future__ import annotations

import functools

import numpy as np
import pytest

pytest.importorskip("tflite", reason="pip install tflite (a dependency of mcutrain)")
pytest.importorskip("tflite_micro.python.tflite_micro.runtime",
                    reason="pip install tflite-micro (the dev extra has it)")

from conftest import needs_gcc
from mcutrain import zoo
from mcutrain.bench.tflm import tflm_outputs
from mcutrain.codegen.cross import build_mcu, run_mcu
from mcutrain.codegen.library import export_library
from mcutrain.engines import ptq
from mcutrain.interop.tflite_export import to_tflite
from mcutrain.interop.tflite_import import from_tflite_bytes
from mcutrain.mcu.hostbuild import build_host
from mcutrain.mcu.hostrun import run_host
from mcutrain.qmodel import QuantModel
from mcutrain.targets import get_target

MODELS = {"digits-cnn": (10, (8, 8, 1)), "small-cnn": (10, (28, 28, 1)), "mnist1d-cnn": (10, (1, 40, 1)),
          "mcunet-5fps": (10, (32, 32, 3)), "mobilenet-v1-0.25": (2, (48, 48, 1))}
SAMPLES = 40


@functools.cache
def imported(arch: str) -> tuple[QuantModel, np.ndarray, np.ndarray]:
    """(the model imported from its .tflite, SAMPLES random int8 inputs, TFLM's outputs on them)."""
    classes, shape = MODELS[arch]
    g = zoo.he_init(zoo.build(arch, classes, shape), seed=0)
    x = np.random.default_rng(0).uniform(-1, 1, (256, *shape)).astype(np.float32)
    data = to_tflite(ptq.quantize_model(g, x))
    qm, _ = from_tflite_bytes(data)
    assert qm.rounding == "tflite"
    x_q = np.random.default_rng(7).integers(-128, 128, (SAMPLES, *qm.graph.input_shape)).astype(np.int8)
    return qm, x_q, tflm_outputs(data, x_q).reshape(SAMPLES, -1)


@needs_gcc
@pytest.mark.parametrize("kernels", ["ref", "dsp"])
@pytest.mark.parametrize("arch", sorted(MODELS))
def test_generated_c_equals_tflm_on_the_host(tmp_path, arch, kernels):
    qm, x_q, ref = imported(arch)
    export_library(qm, tmp_path / "lib", kernels=kernels)
    exe = build_host(tmp_path / "lib", tmp_path / "harness", kernels=kernels)
    logits, _ = run_host(exe, x_q, qm.graph.num_classes)
    np.testing.assert_array_equal(logits, ref)


@pytest.mark.parametrize(("core", "kernels"), [("cortex-m0plus", "ref"), ("cortex-m4", "dsp"),
                                               ("cortex-m7", "dsp")])
@pytest.mark.parametrize("arch", ["small-cnn", "mcunet-5fps"])
def test_generated_c_equals_tflm_under_qemu(arm_tools, tmp_path, arch, core, kernels):
    qm, x_q, ref = imported(arch)
    target = get_target(core)
    export_library(qm, tmp_path / "lib", kernels=kernels)
    b = build_mcu(tmp_path / "lib", target, tmp_path / "m.elf", kernels=kernels)
    logits, _ = run_mcu(b.elf, target, x_q[:4], qm.graph.num_classes, tmp_path / "run")
    np.testing.assert_array_equal(logits, ref[:4])
