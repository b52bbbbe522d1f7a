"""Benchmark `int8-core`: what post-training quantization costs, and the golden engine's speed.

For every zoo model: float32 accuracy against int8 accuracy after PTQ on its
dataset (mcunet-5fps, which has no dataset here, with He-initialized weights:
the agreement of float and int8 predictions on random inputs), and inference
throughput of the integer golden engine against the float engine, measured
alternately in one run (the machines are noisy, so only the ratio is compared).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import zoo
from mcutrain.bench import files
from mcutrain.engines import float_engine, int_engine, ptq

# (arch, dataset, pretrain epochs, Adam lr, training samples used; None = all)
MODELS = [("digits-cnn", "digits", 10, 1e-2, None), ("mnist1d-cnn", "mnist1d", 10, 1e-2, None),
          ("small-cnn", "fashion-mnist", 2, 3e-3, None), ("mcunet-5fps", None, 0, 0.0, None)]
QUICK_MODELS = [("digits-cnn", "digits", 1, 1e-2, 300)]
CALIBRATION = 512
MCUNET_INPUT = (64, 64, 3)


def _throughput(fn, x: np.ndarray, rounds: int) -> float:
    """Best samples/s of `fn(x)` over `rounds` calls."""
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        fn(x)
        best = min(best, time.perf_counter() - t)
    return len(x) / best


def _model_row(arch: str, dataset: str | None, epochs: int, lr: float, n: int | None,
               quick: bool) -> dict[str, Any]:
    from mcutrain.data import load_dataset
    from mcutrain.methods.float import evaluate, train
    rng = np.random.default_rng(0)
    if dataset is None:
        g = zoo.build(arch, input_shape=MCUNET_INPUT, seed=0)
        x_cal = rng.random((64, *MCUNET_INPUT), np.float32)
        x_test, y_test = rng.random((256, *MCUNET_INPUT), np.float32), None
    else:
        ds = load_dataset(dataset, seed=0)
        g = zoo.build(arch, ds.num_classes, ds.shape, seed=0)
        x_tr, y_tr = ds.x_train[:n], ds.y_train[:n]
        train(g, x_tr, y_tr, epochs=epochs, batch=32, lr=lr, seed=0, progress=False)
        x_cal = x_tr[rng.permutation(len(x_tr))[:CALIBRATION]]
        x_test, y_test = ds.x_test, ds.y_test
    qm = ptq.quantize_model(g, x_cal)
    f_pred = np.concatenate([float_engine.forward(g, x_test[i:i + 256]).argmax(1)
                             for i in range(0, len(x_test), 256)])
    q_pred = int_engine.predict(qm, x_test)
    row: dict[str, Any] = {"arch": arch, "dataset": dataset or f"random {MCUNET_INPUT}",
                           "epochs": epochs, "agreement": float(np.mean(f_pred == q_pred))}
    if y_test is not None:
        row["float_accuracy"] = evaluate(g, x_test, y_test)
        row["int8_accuracy"] = float(np.mean(q_pred == y_test))
    batch = x_test[:64 if dataset is None else 256]
    x_q = int_engine.quantize_input(qm, batch)
    rounds = 1 if quick else 5
    f_sps, q_sps = [], []
    for _ in range(rounds):  # alternate the two engines so load changes hit both alike
        f_sps.append(_throughput(lambda x: float_engine.forward(g, x), batch, 1))
        q_sps.append(_throughput(lambda x: int_engine.forward(qm, x), x_q, 1))
    row["float_samples_per_s"] = max(f_sps)
    row["int8_samples_per_s"] = max(q_sps)
    row["int8_over_float"] = row["int8_samples_per_s"] / row["float_samples_per_s"]
    return row


def run_int8_core(work: Path, results: Path, quick: bool, log, docs: Path) -> None:
    """PTQ accuracy (float32 vs int8) of every zoo model, and int8 vs float inference throughput."""
    rows = []
    for spec in QUICK_MODELS if quick else MODELS:
        row = _model_row(*spec, quick=quick)
        log(f"[int8-core] {row}")
        rows.append(row)
        files.write_results(results, "int8-core", rows, quick=quick, complete=False)
    files.write_results(results, "int8-core", rows, quick=quick, complete=True)
    if not quick:
        table = files.markdown_table(rows, ["arch", "dataset", "epochs", "float_accuracy", "int8_accuracy",
                                            "agreement", "float_samples_per_s", "int8_samples_per_s",
                                            "int8_over_float"],
                                      {"float_accuracy": ".4f", "int8_accuracy": ".4f", "agreement": ".4f",
                                      "float_samples_per_s": ".0f", "int8_samples_per_s": ".0f",
                                      "int8_over_float": ".2f"})
        files.update_docs(docs, "int8-core", "Post-training quantization (min/max calibration on "
                           f"{CALIBRATION} training samples) and inference throughput of the integer "
                           "golden engine vs the float engine (one BLAS thread, best of 5 alternating "
                           "rounds).\n\n" + table)


def register(add) -> None:
    add("int8-core", run_int8_core)
