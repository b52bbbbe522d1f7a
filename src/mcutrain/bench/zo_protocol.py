"""The ZO seed's adaptation protocol: corruptions, budget, the pretrained model and the methods.

Shared by the accuracy benchmarks (`zo`: zo-adapt, zo-ablation) and the speed benchmark
(`zo_cost`), which must train and time the same model under the same budget; kept apart
from both so that neither imports the other.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import io, zoo
from mcutrain.bench.files import limit_threads
from mcutrain.data import load_dataset
from mcutrain.graph import Graph
from mcutrain.methods import float as float_method
from mcutrain.methods.base import TrainingMethod
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.zo import ZOConfig, ZOMethod
from mcutrain.methods.zo_select import select_by_score

CORRUPTIONS = ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "motion_blur",
               "contrast", "pixelate", "jpeg_compression", "fog", "zigzag")
TRAINABLE = "layers:conv2,fc1"


@dataclass
class Budget:
    """Epochs, data, queries and learning-rate grids of `zo-adapt` (the same for every method).

    Queries: a ZO step of zo-mix costs one base pass plus `queries` x 2 partial
    passes (conv2 by WP re-runs conv2..fc2, about 90% of a forward pass; fc1 by
    NP re-runs only fc2); 20 queries reach within noise the accuracy of the
    seed's 50 in our probes at well under half the time.
    """

    epochs: int = 5
    queries: int = 20
    seeds: tuple[int, ...] = (0, 1, 2)
    corruptions: tuple[str, ...] = CORRUPTIONS
    n_train: int = 100
    n_val: int = 10
    n_test: int = 90
    pretrain_epochs: int = 2
    pretrain_samples: int = 15000
    lr: dict[str, float] = field(default_factory=lambda: {
        "zo-wp": 1.0, "zo-np": 0.1, "zo-mix": 0.2, "zo-sparse": 0.2, "bp-qas": 0.05,
        "fqt-int8": 1e-3, "float32": 1e-3})
    """Centres of the learning-rate grids (`lr_grid`), set by short probes on validation accuracy.

    NOTE: with GNS the WP estimate of conv2 is shrunk by n / (n + d - 1) (about
    1/230 at 20 queries), so zo-mix leaves conv2 unchanged below a rate of
    about 0.1, while its NP estimate of fc1 (almost unshrunk) diverged even at
    0.1 on impulse noise and zigzag before the weight-step limit (`ZOConfig.max_step`,
    `bench.zo_diagnose`); the best rate differs by corruption, hence a choice
    per corruption. fqt-int8 diverges above about 0.005.
    """
    tuned: tuple[str, ...] = ("zo-wp", "zo-np", "zo-mix", "zo-sparse", "bp-qas", "fqt-int8", "float32")
    lr_factors: tuple[float, ...] = (0.5, 1.0, 2.0)
    tune_seed: int = 0
    """The split seed on which every tuned method runs its whole grid per corruption."""
    workers: int = 2
    """Processes running (seed, corruption) units side by side; results do not depend on it."""


QUICK = Budget(epochs=1, queries=2, seeds=(0,), corruptions=("gaussian_noise",), n_train=10, n_val=2,
               n_test=5, pretrain_epochs=1, pretrain_samples=2000, tuned=(), workers=1)


PINNED_MODEL = "zo-adapt-pretrained.npz"
"""The committed pretrained model, in the `models/` folder beside the benchmarks' `work/` folder."""


def pretrained_file(work: Path, budget: Budget, quick: bool) -> Path:
    """The file of small-cnn trained in float on clean Fashion-MNIST (trained once, into `work`).

    The full-budget model is pinned: where `work/../models/` holds it (the repository's
    `benchmarks/models/`), that file is the model, so every machine adapts the same weights.
    NOTE: training it again gives other weights on another CPU, since OpenBLAS picks its float
    kernel per CPU at run time (and its thread count changes the sums too), and every adaptation
    result moves with the model.
    """
    path = work / ("pretrained-quick.npz" if quick else "pretrained.npz")
    pinned = work.parent / "models" / PINNED_MODEL
    if not quick and not path.exists() and pinned.is_file():
        return pinned
    if not path.exists():
        _train_pretrained(path, budget)
    return path


def pretrained_model(work: Path, budget: Budget, quick: bool) -> tuple[Graph, dict[str, Any]]:
    """The model of `pretrained_file`; its meta names the file and its SHA-256."""
    path = pretrained_file(work, budget, quick)
    mf = io.load(path)
    return mf.graph, {**mf.meta, "file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def _train_pretrained(path: Path, budget: Budget) -> None:
    """Train the model with one BLAS thread (the sums then do not depend on the core count)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ds = load_dataset("fashion-mnist", seed=0)
    n = min(budget.pretrain_samples, len(ds.x_train))
    g = zoo.build("small-cnn", seed=0)
    t0 = time.perf_counter()
    with limit_threads(1):
        float_method.train(g, ds.x_train[:n], ds.y_train[:n], epochs=budget.pretrain_epochs, batch=64,
                           lr=2e-3, seed=0, progress=False)
    acc = float_method.evaluate(g, ds.x_test, ds.y_test)
    io.save(path, g, {"dataset": "fashion-mnist", "float_accuracy": acc,
                      "seconds": time.perf_counter() - t0})


def make_method(name: str, qm, graph: Graph, x_tr: np.ndarray, y_tr: np.ndarray, budget: Budget,
                seed: int) -> TrainingMethod | None:
    """The method `name` on a fresh copy of the pretrained model (None for `none`)."""
    q = budget.queries
    if name == "none":
        return None
    if name.startswith("zo-") and name != "zo-sparse":
        perturb = {"zo-wp": "wp", "zo-np": "np", "zo-mix": "mix"}[name]
        return ZOMethod(qm, ZOConfig(trainable=TRAINABLE, queries=q, perturb=perturb, seed=seed + 1))
    if name == "zo-sparse":
        pick = select_by_score(qm, x_tr[:100], y_tr[:100], ["conv1", "conv2", "fc1"], k=1,
                               config=ZOConfig(queries=q, perturb="mix", seed=seed + 1))
        return ZOMethod(qm, ZOConfig(trainable="layers:" + ",".join(pick), queries=q, perturb="mix",
                                     seed=seed + 1))
    if name == "bp-qas":
        return BPQASMethod(qm, BPQASConfig(trainable=TRAINABLE, momentum=0.9))
    if name == "fqt-int8":
        from mcutrain.methods.fqt import FQT, FQTConfig
        return FQT(graph.copy(), FQTConfig(precision="int8", trainable=TRAINABLE, seed=seed), x_tr[:100])
    if name == "float32":
        from mcutrain.methods.float import FloatMethod
        return FloatMethod(graph.copy(), optimizer="adam", trainable=["conv2", "fc1"])
    raise ValueError(f"unknown benchmark method '{name}'")


ADAPT_METHODS = ("none", "zo-wp", "zo-np", "zo-mix", "zo-sparse", "bp-qas", "fqt-int8", "float32")
