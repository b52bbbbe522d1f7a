"""FQT libraries of "tflite"-rounding models (host gcc, ASan + UBSan): started from a model's own
integers, the generated step equals the simulated `FQT` after every step (logits, losses, every state
entry, the RNG) with its forward in TFLite's rounding -- requantization, ADD with multipliers computed
on the device, MEAN -- for the whole graph and the last layers, the reference and the DSP loops, with
and without partial updates; each case also differs from the same integers trained in 'single', so
the equality tells the modes apart. The library fixes its mode (runtime/mt_config.h, model.c's guard)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_fqt_dsp import odd_graph, pool_graph
from test_fqt_graph import random_graph
from test_fqt_partial_keep import check_steps

from conftest import needs_gcc
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.emit_fqt import quantize_input
from mcutrain.codegen.library import export_training_library
from mcutrain.engines import ptq
from mcutrain.graph import Op
from mcutrain.mcu.hostbuild import build_host_train
from mcutrain.mcu.hostrun import run_host_train
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.qmodel import QuantModel

pytestmark = needs_gcc

LR = 0.05


def tflite_model(g: G.Graph, seed: int = 3) -> QuantModel:
    """`g` quantized as a TFLite converter would leave it: PTQ in mode tflite."""
    x = np.random.default_rng(seed).random((16, *g.input_shape), dtype=np.float32)
    return ptq.quantize_model(g, x, rounding="tflite")


def batches_of(qm: QuantModel, n: int, batch: int, seed: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    x = rng.random((n * batch, *qm.graph.input_shape), dtype=np.float32)
    y = rng.integers(0, qm.graph.num_classes, n * batch)
    return [(x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch]) for i in range(n)]


def trained_twins(qm: QuantModel, cfg: FQTConfig, batches, warm: int = 0):
    """(a factory of FQT at the state after `warm` simulated steps, the measured batches)."""
    calib = batches[0][0]
    m = FQT(qm, dataclasses.replace(cfg, lambda_min=min(cfg.lambda_min, 0.1)) if warm else cfg, calib)
    for x, y in batches[:warm]:
        m.step(x, y, LR)
    state = m.state()

    def new() -> FQT:
        f = FQT(qm, cfg, calib)
        f.load_state(*state)
        return f
    return new, batches[warm:]


def run_library(tmp_path, new, batches, kernels: str):
    m = new()
    res = export_training_library(m, tmp_path / "lib", batch=len(batches[0][1]), kernels=kernels)
    exe = build_host_train(tmp_path / "lib", tmp_path / "train", kernels=kernels)
    out = run_host_train(exe, [(quantize_input(m, x), y) for x, y in batches], LR, res.model,
                         m.graph.num_classes)
    return out, res.model


def single_differs(qm: QuantModel, cfg: FQTConfig, batches, warm: int) -> bool:
    """Do the same integers trained in 'single' reach other logits or weights on these batches (and
    other logits on 64 more samples after them)?"""
    runs = []
    probe = batches_of(qm, 1, 64, seed=9)
    for model in (qm, dataclasses.replace(qm, rounding="single")):
        new, rest = trained_twins(model, cfg, batches, warm)
        m, logits = new(), []
        for x, y in [*rest, *probe]:
            logits.append(m.logits_and_losses(x, y)[0])
            m.step(x, y, LR)
        runs.append((np.concatenate([lg.reshape(-1) for lg in logits]),
                     np.concatenate([w.reshape(-1) for w in m.w.values()])))
    return any((a != b).any() for a, b in zip(*runs))


CASES = [  # (graph, trainable, batch, kernels, lambda_min, warm steps)
    (lambda: random_graph(1), "all", 1, "ref", 1.0, 0),     # residual adds (one fused relu), MEAN
    (lambda: random_graph(1), "all", 1, "dsp", 1.0, 0),
    (lambda: random_graph(4), "all", 2, "dsp", 1.0, 0),     # batch 2, a grouped conv
    (lambda: random_graph(2), "last:4", 1, "dsp", 1.0, 0),  # the last layers only
    (lambda: zoo.build("digits-cnn", seed=1), "last:2", 1, "ref", 1.0, 0),
    (odd_graph, "all", 1, "dsp", 0.1, 2),                   # partial updates from a trained state
    (pool_graph, "all", 1, "ref", 0.1, 4),
]


@pytest.mark.parametrize(("graph", "trainable", "batch", "kernels", "lambda_min", "warm"), CASES,
                         ids=[f"{i}-{c[1]}-b{c[2]}-{c[3]}-l{c[4]}" for i, c in enumerate(CASES)])
def test_fqt_int8_steps_of_a_tflite_model_equal_the_simulator(tmp_path, graph, trainable, batch, kernels,
                                                               lambda_min, warm):
    qm = tflite_model(graph())
    cfg = FQTConfig(precision="int8", trainable=trainable, seed=5, lambda_min=lambda_min)
    batches = batches_of(qm, warm + 3, batch)
    new, rest = trained_twins(qm, cfg, batches, warm)
    assert new().rounding == "tflite"
    out, src = run_library(tmp_path, new, rest, kernels)
    macs = check_steps(out, new, rest, src)
    assert single_differs(qm, cfg, batches, warm), "the modes agree here: the case would not tell them apart"
    if lambda_min < 1:
        assert min(macs) < sum(qm.graph.macs(n) for n in qm.graph.parametric())   # really partial
    model_c = (tmp_path / "lib" / "model.c").read_text()
    assert "#if !MT_ROUNDING_TFLITE" in model_c
    assert "#define MT_ROUNDING_TFLITE 1" in (tmp_path / "lib" / "runtime" / "mt_config.h").read_text()
    ops = {n.op for n in qm.graph.nodes}
    assert (Op.ADD not in ops) or "mt_add_fwd_s8_tflite_range(" in model_c
    assert (Op.GLOBAL_AVGPOOL not in ops) or "mt_global_avgpool_fwd_s8_tflite(" in model_c


@pytest.mark.parametrize("precision", ["uint8", "float32"])
def test_other_precisions_of_a_tflite_model_build_single(tmp_path, precision):
    """uint8 and float32 start from the model's float graph and have no rounding mode in their forward
    (float32 multipliers, or float32): their library ships the single runtime and equals the simulator."""
    qm = tflite_model(odd_graph())
    cfg = FQTConfig(precision=precision, trainable="all", seed=5, exact_float_order=precision == "float32")
    new, rest = trained_twins(qm, cfg, batches_of(qm, 3, 1))
    out, src = run_library(tmp_path, new, rest, "ref")
    check_steps(out, new, rest, src)
    assert "MT_ROUNDING_TFLITE" not in (tmp_path / "lib" / "model.c").read_text()
