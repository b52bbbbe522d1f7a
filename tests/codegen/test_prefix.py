"""Two libraries in one program: `--prefix` gives every name and file of a library its prefix, so a
digits-cnn inference library (TFLite rounding, reference kernels) and a ZO training library
(single rounding, DSP build) link into one host program whose one translation unit includes both
headers; each computes exactly what the golden engine and the simulator compute."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import needs_gcc
from mcutrain import zoo
from mcutrain.codegen.cformat import c_prefix
from mcutrain.codegen.library import export_library, export_training_library
from mcutrain.codegen.prefix import prefixed_files, prefixed_text
from mcutrain.engines import int_engine, ptq
from mcutrain.methods import zo_estimator as est
from mcutrain.methods.zo import ZOConfig, ZOMethod

SAMPLES, STEPS, BATCH, LR = 6, 2, 2, 0.05

MAIN_C = r"""
/* One program, two mcutrain libraries: INFER N_SAMPLES TRAIN OUT (raw little-endian files). */
#include <stdio.h>
#include <string.h>

#include "digits_model.h"
#include "zo_model.h"

static int8_t x[DIGITS_MODEL_INPUT_SIZE];
static int8_t logits[DIGITS_MODEL_OUTPUT_SIZE];
static int32_t labels[ZO_MODEL_TRAIN_BATCH];
static int32_t losses[ZO_MODEL_TRAIN_BATCH];
static uint8_t state[ZO_MODEL_STATE_BYTES];

int main(int argc, char **argv)
{
    FILE *in, *train, *out;
    float lr;
    int32_t i, steps;
    if (argc < 4 || digits_model_init() != DIGITS_MT_OK || zo_model_init() != ZO_MT_OK) return 2;
    in = fopen(argv[1], "rb"); train = fopen(argv[2], "rb"); out = fopen(argv[3], "wb");
    if (!in || !train || !out) return 2;
    while (fread(x, 1, sizeof(x), in) == sizeof(x)) {
        if (digits_model_predict(x, logits) != DIGITS_MT_OK) return 3;
        fwrite(logits, 1, sizeof(logits), out);
    }
    if (fread(&lr, 4, 1, train) != 1 || fread(&steps, sizeof(steps), 1, train) != 1) return 2;
    for (i = 0; i < steps; ++i) {
        int8_t *b = zo_model_train_input_buffer();
        size_t n = ZO_MODEL_TRAIN_BATCH * ZO_MODEL_INPUT_SIZE, nb = ZO_MODEL_TRAIN_BATCH;
        if (fread(b, 1, n, train) != n || fread(labels, 4, nb, train) != nb) return 2;
        if (zo_model_train_step(b, labels, lr, losses, NULL) != ZO_MT_OK) return 4;
        fwrite(losses, 4, ZO_MODEL_TRAIN_BATCH, out);
    }
    if (zo_model_save_state(state, ZO_MODEL_STATE_BYTES) != ZO_MT_OK) return 5;
    fwrite(state, 1, sizeof(state), out);
    fclose(out);
    return 0;
}
"""

CMAKE_TOP = """cmake_minimum_required(VERSION 3.13)
project(two_models C)
add_subdirectory(digits)
add_subdirectory(zo)
add_executable(two main.c)
target_link_libraries(two digits_model zo_model)
"""


def _models():
    rng = np.random.default_rng(0)
    g = zoo.build("digits-cnn", seed=1)
    calib = rng.random((32, *g.input_shape), dtype=np.float32)
    infer_qm = ptq.quantize_model(g, calib, rounding="tflite")
    train_qm = ptq.quantize_model(zoo.build("digits-cnn", seed=2), calib)
    x = rng.random((SAMPLES, *g.input_shape), dtype=np.float32)
    batches = [(rng.random((BATCH, *g.input_shape), dtype=np.float32), rng.integers(0, 10, BATCH))
               for _ in range(STEPS)]
    return infer_qm, train_qm, x, batches


def _zo(qm) -> ZOMethod:
    return ZOMethod(qm, ZOConfig(queries=3, perturb="mix", seed=5))


def _export_both(tmp_path: Path):
    infer_qm, train_qm, x, batches = _models()
    export_library(infer_qm, tmp_path / "digits", kernels="ref", prefix="digits_")
    res = export_training_library(_zo(train_qm), tmp_path / "zo", batch=BATCH, kernels="dsp", prefix="zo_")
    (tmp_path / "main.c").write_text(MAIN_C)
    (tmp_path / "infer.bin").write_bytes(int_engine.quantize_input(infer_qm, x).tobytes())
    with open(tmp_path / "train.bin", "wb") as f:
        f.write(np.float32(LR).tobytes() + np.array([STEPS], "<i4").tobytes())
        for xb, yb in batches:
            f.write(int_engine.quantize_input(train_qm, xb).tobytes() + yb.astype("<i4").tobytes())
    return infer_qm, train_qm, x, batches, res.model


def _check_outputs(exe: Path, tmp_path: Path, infer_qm, train_qm, x, batches, src) -> None:
    subprocess.run([str(exe), "infer.bin", "train.bin", "out.bin"], cwd=tmp_path, check=True, timeout=120)
    _check_blob((tmp_path / "out.bin").read_bytes(), infer_qm, train_qm, x, batches, src)


def _check_blob(blob: bytes, infer_qm, train_qm, x, batches, src) -> None:
    """The program's output: the inference logits equal the golden engine's, the per-step losses and
    the final training state the simulator's."""
    k = infer_qm.graph.num_classes
    want = int_engine.run(infer_qm, int_engine.quantize_input(infer_qm, x))[infer_qm.graph.output]
    np.testing.assert_array_equal(np.frombuffer(blob[:SAMPLES * k], np.int8).reshape(SAMPLES, k),
                                  want.reshape(SAMPLES, k))
    losses = np.frombuffer(blob[SAMPLES * k:SAMPLES * k + 4 * BATCH * STEPS], "<i4").reshape(STEPS, BATCH)
    sim = _zo(train_qm)
    for s, (xb, yb) in enumerate(batches):
        logits = int_engine.run(sim.qm, int_engine.quantize_input(sim.qm, xb))[sim.qm.graph.output]
        np.testing.assert_array_equal(losses[s], est.per_sample_loss(sim.qm, logits.reshape(BATCH, -1), yb))
        sim.step(xb, yb, LR)
    state = src.parse_state(blob[SAMPLES * k + 4 * BATCH * STEPS:])
    assert state["steps"] == STEPS and state["rng"] == sim.rng.state
    changed = 0
    for e in src.state:
        layer, kind = e.name.rsplit(".", 1)
        want_t, before = ((sim.qm.weights[layer], train_qm.weights[layer]) if kind == "weight"
                          else (sim.qm.biases[layer], train_qm.biases[layer]))
        np.testing.assert_array_equal(state[e.name], want_t, err_msg=e.name)
        changed += int(np.sum(want_t != before))
    assert changed > 0   # the steps trained something, so equality is not trivial


def _global_symbols(exe: Path) -> list[str]:
    out = subprocess.run(["nm", "--defined-only", "-g", str(exe)], capture_output=True, text=True, check=True)
    return [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]


@needs_gcc
def test_two_prefixed_libraries_link_into_one_program_and_stay_exact(tmp_path):
    args = _export_both(tmp_path)
    for lib in ("digits", "zo"):
        subprocess.run(["make", "-s", "-C", lib, "CC=gcc"], cwd=tmp_path, check=True, timeout=600)
    inc = [f"-I{tmp_path / lib / d}" for lib in ("digits", "zo") for d in (".", "runtime")]
    exe = tmp_path / "two"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", *inc, "main.c",
                    "digits/libdigits_model.a", "zo/libzo_model.a", "-o", str(exe)],
                   cwd=tmp_path, check=True, timeout=120)
    _check_outputs(exe, tmp_path, *args)
    symbols = _global_symbols(exe)
    assert any(s.startswith("digits_mt_") for s in symbols) and any(s.startswith("zo_mt_") for s in symbols)
    assert not [s for s in symbols if s.startswith(("mt_", "model_", "MT_", "MODEL_"))]


@needs_gcc
@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed (apt-get install cmake); "
                    "the Makefile variant of this test still runs")
def test_two_prefixed_libraries_build_as_cmake_subdirectories(tmp_path):
    args = _export_both(tmp_path)
    (tmp_path / "CMakeLists.txt").write_text(CMAKE_TOP)
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(build), "-DCMAKE_C_COMPILER=gcc"], check=True,
                   capture_output=True, timeout=300)
    subprocess.run(["cmake", "--build", str(build), "-j", "2"], check=True, capture_output=True, timeout=600)
    _check_outputs(build / "two", tmp_path, *args)


def test_two_prefixed_dsp_libraries_link_for_cortex_m4_and_stay_exact(arm_tools, tmp_path):
    """Cross-built, the kernels both libraries call are there twice, each built its own way (reference
    loops for digits_, the DSP loops for zo_), and each library still computes its own bits."""
    from mcutrain.mcu import build, count_instructions

    infer_qm, train_qm, x, batches, src = _export_both(tmp_path)
    srcs = [tmp_path / "main.c"] + [p for lib in ("digits", "zo") for folder in (lib, f"{lib}/runtime")
                                    for p in sorted((tmp_path / folder).glob("*.c"))]
    inc = [tmp_path / lib / d for lib in ("digits", "zo") for d in (".", "runtime")]
    elf = build(srcs, "cortex-m4", tmp_path / "two.elf", include_dirs=inc,
                defines=["DIGITS_MT_KERNELS_REF"]).elf
    symbols = _global_symbols(elf)
    assert {"digits_mt_conv2d_fwd_s8", "zo_mt_conv2d_fwd_s8"} <= set(symbols)
    startup = {"mt_fault_handler", "mt_vectors"}     # the QEMU board's startup (mcu/startup), not a library's
    assert not [s for s in symbols if s.startswith(("mt_", "model_")) and s not in startup]
    prof = count_instructions(elf, "cortex-m4", ["infer.bin", "train.bin", "out.bin"], cwd=tmp_path,
                              timeout=600)
    assert prof.exit_code == 0, prof.stdout
    _check_blob((tmp_path / "out.bin").read_bytes(), infer_qm, train_qm, x, batches, src)


@pytest.mark.parametrize("bad", ["", "Kws_", "kws", "_kws_", "1kws_", "kws-1_", "k" * 24 + "_", "kws_\n"])
def test_a_prefix_that_is_not_a_c_identifier_prefix_is_refused(bad):
    with pytest.raises(ValueError, match="not a C identifier prefix"):
        c_prefix(bad)


def test_a_good_prefix_is_returned_unchanged():
    assert c_prefix("kws_") == "kws_" and c_prefix("m2_v1_") == "m2_v1_"


def test_the_rename_keeps_strings_and_renames_comments_includes_and_flags():
    names = {"mt_nn.h", "mt_status", "model_predict", "MT_KERNELS_REF"}
    text = ('#include "mt_nn.h"\n/* model_predict\'s status: mt_status (-DMT_KERNELS_REF) */\n'
            'mt_status model_predict(void) { hook("model_predict", \'"\'); '
            'asm(".global mt_status\\n\\tmt_status"); return s.mt_status; }\n')
    assert prefixed_text(text, names, "k_") == (
        '#include "k_mt_nn.h"\n/* k_model_predict\'s status: k_mt_status (-DK_MT_KERNELS_REF) */\n'
        'k_mt_status k_model_predict(void) { hook("k_model_predict", \'"\'); '
        'asm(".global k_mt_status\\n\\tk_mt_status"); return s.k_mt_status; }\n')
    kept = prefixed_text(text, names, "k_", keep_strings=True)   # model.c: layer names are model text
    assert 'hook("model_predict"' in kept and 'asm(".global mt_status' in kept


def test_no_prefix_leaves_every_file_as_it_is():
    files = {"model.h": "int model_init(void);", "runtime/mt_nn.h": "int mt_x;"}
    assert prefixed_files(files, "") is files


OTHER_NAMES = ("MT_BOARD", "mt_board.h", "mt_mark_begin", "mt_mark_end", "mt_stack_used",
               "MT_RUNTIME_SOURCES")
"""Not the library's: what the drivers take from mcutrain's board support under QEMU (`mcu/`), and a
CMake variable, which lives in the library's own directory scope."""


def test_a_prefixed_library_holds_no_unprefixed_name(tmp_path):
    _, train_qm, *_ = _models()
    res = export_training_library(_zo(train_qm), tmp_path / "zo", batch=BATCH, kernels="ref", prefix="zo_")
    assert {"zo_model.h", "zo_model.c", "runtime/zo_mt_nn.h", "runtime/zo_mt_config.h"} <= set(res.files)
    left = {}
    for rel in res.files:
        words = set(re.findall(r"\b(?:mt|MT|model|MODEL)_[\w.]*\w", (tmp_path / "zo" / rel).read_text()))
        if words - set(OTHER_NAMES):
            left[rel] = sorted(words - set(OTHER_NAMES))
    assert not left
