"""The generated `model_train_step` refuses a learning rate that is not finite and > 0.

Every method (zo, bp-qas, fqt in each precision) returns MT_ERR_ARG for NaN, +inf, -inf, 0, -0 and
a negative rate, before it touches any state: a small driver saves the state blob before and
after the refused call and compares them byte for byte. The real training harness (lr in the
data file's header as float32 bits, `write_train_data`) reports the status too. That a normal
rate trains bit-exactly is covered by test_train_export.py and test_fqt_precisions.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_fqt_precisions import pool_graph
from test_train_export import tiny_graph

from conftest import needs_gcc
from mcutrain.codegen.library import export_training_library
from mcutrain.contain import private_dir, run_program
from mcutrain.engines import int_engine, ptq
from mcutrain.mcu.hostbuild import HostBuildError, build_host_train
from mcutrain.mcu.hostrun import run_host_train
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import PRECISIONS, FQTConfig
from mcutrain.methods.zo import ZOConfig, ZOMethod

BAD_LRS = {"nan": float("nan"), "+inf": float("inf"), "-inf": float("-inf"), "zero": 0.0,
           "minus-zero": -0.0, "negative": -0.01}

DRIVER_C = """\
/* lr driver: model_lr_driver LRBITS... (hex float32 bits): one refused step per rate, state unchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

static int32_t labels[MODEL_TRAIN_BATCH];
static int32_t losses[MODEL_TRAIN_BATCH];
static uint8_t before[MODEL_STATE_BYTES];
static uint8_t after[MODEL_STATE_BYTES];

int main(int argc, char **argv)
{
    int i;
    if (model_init() != MT_OK) {
        return 3;
    }
    memset(model_train_input_buffer(), 1, MODEL_TRAIN_BATCH * MODEL_INPUT_SIZE);
    for (i = 1; i < argc; ++i) {
        uint32_t bits = (uint32_t)strtoul(argv[i], NULL, 16);
        float lr;
        mt_status st;
        memcpy(&lr, &bits, 4);
        if (model_save_state(before, MODEL_STATE_BYTES) != MT_OK) {
            return 4;
        }
        st = model_train_step(model_train_input_buffer(), labels, lr, losses, NULL);
        if (model_save_state(after, MODEL_STATE_BYTES) != MT_OK) {
            return 4;
        }
        printf("%s status %d unchanged %d steps %lu\\n", argv[i], (int)st,
               memcmp(before, after, MODEL_STATE_BYTES) == 0, (unsigned long)model_train_steps());
    }
    return 0;
}
"""


def _calibration(g) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((8, *g.input_shape), dtype=np.float32), rng.integers(0, g.num_classes, 8)


def make_method(name: str):
    """A method on the small graphs of test_train_export / test_fqt_precisions (quick to build)."""
    if name.startswith("fqt-"):
        g = pool_graph()  # every FQT precision has a C step for it (no depthwise conv)
        cfg = FQTConfig(precision=name[4:], seed=5, exact_float_order=True)
        return FQT(g, cfg, _calibration(g)[0])
    qm = ptq.quantize_model(tiny_graph(), _calibration(tiny_graph())[0])
    if name == "zo":
        return ZOMethod(qm, ZOConfig(queries=2, seed=5))
    return BPQASMethod(qm, BPQASConfig(momentum=0.9))


def _bits(lr: float) -> str:
    return f"{int(np.array([lr], '<f4').view('<u4')[0]):08x}"


METHODS = ["zo", "bp-qas", *(f"fqt-{p}" for p in PRECISIONS)]


@needs_gcc
@pytest.mark.parametrize("method", METHODS)
def test_bad_learning_rates_are_refused_before_any_state_changes(tmp_path, method):
    lib = tmp_path / "lib"
    export_training_library(make_method(method), lib, batch=1, kernels="ref")
    # The harness build compiles harness/train_main.c: put the lr driver in its place.
    (lib / "harness" / "train_main.c").write_text(DRIVER_C)
    exe = build_host_train(lib, tmp_path / "lr_driver")
    words = [_bits(v) for v in BAD_LRS.values()]
    with private_dir("mt-lr-") as d:
        r = run_program(exe, words, d, timeout=120)
    out = r.stdout.decode()
    assert r.returncode == 0, out + r.stderr.decode()
    lines = out.splitlines()
    assert len(lines) == len(BAD_LRS), out
    for (name, _), word, line in zip(BAD_LRS.items(), words, lines):
        assert line == f"{word} status -1 unchanged 1 steps 0", f"lr {name}: {line}"


@needs_gcc
@pytest.mark.parametrize("name", ["nan", "+inf", "negative"])
def test_the_harness_reports_the_refused_rate(tmp_path, name):
    """The data file carries lr as float32 bits; the harness stops at step 0 with the status."""
    m = make_method("zo")
    res = export_training_library(m, tmp_path / "lib", batch=1, kernels="ref")
    exe = build_host_train(tmp_path / "lib", tmp_path / "train")
    x, y = _calibration(m.qm.graph)
    batch = (int_engine.quantize_input(m.qm, x[:1]), y[:1])
    with pytest.raises(HostBuildError, match="status -1 at step 0"):
        run_host_train(exe, [batch], BAD_LRS[name], res.model, m.qm.graph.num_classes)
