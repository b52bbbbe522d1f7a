"""Benchmarks of the ZO seed: `zo-adapt` (corruption adaptation) and `zo-ablation` (loss curves).

The seed's protocol (Zhao et al., TODAES 2025), scaled to our data: small-cnn
pretrained in float on clean Fashion-MNIST, quantized to int8 (PTQ), then
adapted to each corruption at severity 5 with 100 training / 10 validation /
90 test images per class of the corrupted test set, batch 100, reporting the
test accuracy at the best validation epoch. Every method gets the same data,
epochs and trainable layers (`conv2` and `fc1`; the classifier `fc2` stays
frozen, as in the seed's runs). The budget (epochs, queries) is chosen so the
whole benchmark fits about two hours on two cores; `--quick` runs one
corruption, one seed and one epoch on a few samples. Every method picks its
learning rate per corruption from the same three-point grid by validation
accuracy (`run_adapt`), because zo-mix's best rate differs fourfold between
the noise and the blur corruptions (`Budget.lr`).

Run: ``python -m mcutrain.bench_zo zo-adapt [--quick]``; `zo-cost` lives in `bench_zo_cost` (or through
`mcutrain bench` once it registers `register()`).
"""

from __future__ import annotations

import argparse
import io as _io
import json
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import io, zoo
from mcutrain.engines import int_engine, ptq
from mcutrain.graph import Graph
from mcutrain.io import atomic_write_bytes
from mcutrain.methods.base import TrainingMethod
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.loop import evaluate, fit
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
    about 0.1, while its NP estimate of fc1 (almost unshrunk) diverges above
    0.1 on the noise corruptions; the best rate differs by corruption, hence
    a choice per corruption. fqt-int8 diverges above about 0.005.
    """
    tuned: tuple[str, ...] = ("zo-wp", "zo-np", "zo-mix", "zo-sparse", "bp-qas", "fqt-int8", "float32")
    lr_factors: tuple[float, ...] = (0.5, 1.0, 2.0)
    tune_seed: int = 0
    """The split seed on which every tuned method runs its whole grid per corruption."""
    workers: int = 2
    """Processes running (seed, corruption) units side by side; results do not depend on it."""


QUICK = Budget(epochs=1, queries=2, seeds=(0,), corruptions=("gaussian_noise",), n_train=10, n_val=2,
               n_test=5, pretrain_epochs=1, pretrain_samples=2000, tuned=(), workers=1)


def pretrained_model(work: Path, budget: Budget, quick: bool) -> tuple[Graph, dict[str, Any]]:
    """small-cnn trained in float on clean Fashion-MNIST, cached in `work` (trained once)."""
    from mcutrain.data import load_dataset
    from mcutrain.methods import float as float_method
    path = work / ("pretrained-quick.npz" if quick else "pretrained.npz")
    if path.exists():
        mf = io.load(path)
        return mf.graph, mf.meta
    ds = load_dataset("fashion-mnist", seed=0)
    n = min(budget.pretrain_samples, len(ds.x_train))
    g = zoo.build("small-cnn", seed=0)
    t0 = time.perf_counter()
    float_method.train(g, ds.x_train[:n], ds.y_train[:n], epochs=budget.pretrain_epochs, batch=64,
                       lr=2e-3, seed=0, progress=False)
    acc = float_method.evaluate(g, ds.x_test, ds.y_test)
    meta = {"dataset": "fashion-mnist", "float_accuracy": acc, "seconds": time.perf_counter() - t0}
    io.save(path, g, meta)
    return g, meta


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


def _fqt_available() -> bool:
    try:
        from mcutrain.methods.fqt import FQT  # noqa: F401
    except ImportError:
        return False
    return True


def _adapt_data(graph: Graph, corr: str, seed: int, budget: Budget, quick: bool):
    """(qm, x_tr, y_tr, x_val, y_val, x_te, y_te) of one corruption and split seed."""
    from mcutrain.data import adaptation_split, load_dataset
    ds = load_dataset(f"fashion-mnist-c:{corr}:5", seed=0)
    split = adaptation_split(ds.x_test, ds.y_test, budget.n_train, budget.n_val, seed=seed,
                             n_test=budget.n_test)
    qm = ptq.quantize_model(graph, ds.clean_train[:512] if not quick else ds.clean_train[:64])
    return (qm, *split)


def _adapt_run(name: str, graph: Graph, data, budget: Budget, seed: int, lr: float) -> dict[str, Any]:
    """Train method `name` on one split; the run record (test accuracy at the best validation epoch)."""
    qm, x_tr, y_tr, x_val, y_val, x_te, y_te = data
    t0 = time.perf_counter()
    m = make_method(name, qm, graph, x_tr, y_tr, budget, seed)
    if m is None:
        before = float(np.mean(int_engine.predict(qm, x_te) == y_te))
        run = {"accuracy_before": before, "accuracy_after": before, "forward_passes": 0, "steps": 0,
               "history": [], "best_val_accuracy": None}
    else:
        r = fit(m, x_tr, y_tr, x_te, y_te, epochs=budget.epochs, batch=100, lr=lr, seed=seed, x_val=x_val,
                y_val=y_val, progress=False)
        run = {"accuracy_before": r.accuracy_before, "accuracy_after": r.accuracy_after,
               "forward_passes": r.forward_passes, "steps": r.steps, "history": r.history,
               "best_val_epoch": r.best_val_epoch,
               "best_val_accuracy": max(h["val_accuracy"] for h in r.history)}
    run.update({"method": name, "seed": seed, "lr": lr, "seconds": time.perf_counter() - t0})
    return run


def _run_unit(task: tuple) -> tuple[int, list[dict[str, Any]]]:
    """Worker: methods `jobs` ((name, lr) pairs) on one (corruption, split seed); the run records.

    The pretrained model comes from its file in `work`, so a task carries only names and numbers.
    """
    i, work, budget, quick, corr, seed, jobs = task
    graph, _ = pretrained_model(work, budget, quick)
    data = _adapt_data(graph, corr, seed, budget, quick)
    return i, [_adapt_run(name, graph, data, budget, seed, lr) | {"corruption": corr} for name, lr in jobs]


def _map_units(tasks: list[tuple], workers: int):
    """Yield `_run_unit(task)` for every task, in completion order, on `workers` processes."""
    tasks = [(i, *t) for i, t in enumerate(tasks)]
    if workers <= 1 or len(tasks) <= 1:
        yield from map(_run_unit, tasks)
        return
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(min(workers, len(tasks))) as pool:
        yield from pool.imap_unordered(_run_unit, tasks)


def lr_grid(name: str, budget: Budget) -> list[float]:
    """The learning rates `name` tries: `lr_factors` x its centre if tuned, else the centre alone."""
    if name == "none":
        return [0.0]
    if name not in budget.tuned:
        return [float(budget.lr[name])]
    return [float(budget.lr[name] * f) for f in budget.lr_factors]


def pick_run(runs: list[dict[str, Any]], centre: float) -> dict[str, Any]:
    """The run of best validation accuracy (never test); ties go to the rate nearest the grid centre."""
    if len(runs) == 1:
        return runs[0]
    return max(runs, key=lambda r: (r["best_val_accuracy"], -abs(np.log(r["lr"] / centre))))


def _run_order(r: dict[str, Any]) -> tuple:
    return (r["seed"], CORRUPTIONS.index(r["corruption"]) if r["corruption"] in CORRUPTIONS else 99,
            ADAPT_METHODS.index(r["method"]), r["lr"])


def run_adapt(work: Path, results: Path, quick: bool = False, log=print,
              docs: Path = Path("docs"), budget: Budget | None = None) -> dict[str, Any]:
    """The `zo-adapt` benchmark; writes results after every finished unit so nothing is lost.

    Learning rates are chosen per corruption and method by validation accuracy:
    on split seed `tune_seed` every tuned method runs its whole grid
    (`lr_grid`) and keeps the run of best validation accuracy (`pick_run`) as
    that seed's result; the other seeds run at the chosen rate. Test accuracy
    never takes part in a choice.
    """
    budget = budget or (QUICK if quick else Budget())
    _, meta = pretrained_model(work, budget, quick)          # trained once, before the workers start
    methods = [m for m in ADAPT_METHODS if m != "fqt-int8" or _fqt_available()]
    budget = replace(budget, tuned=tuple(m for m in budget.tuned if m in methods))
    doc: dict[str, Any] = {"benchmark": "zo-adapt", "quick": quick, "arch": "small-cnn",
                           "pretrained": meta, "budget": {k: v for k, v in budget.__dict__.items()},
                           "trainable": TRAINABLE, "runs": [], "rows": [], "lr_tuning": []}
    t_all = time.perf_counter()
    chosen: dict[tuple[str, str], float] = {}

    def record(runs: list[dict[str, Any]]) -> None:
        for run in runs:
            log(f"[zo-adapt] seed {run['seed']} {run['corruption']:18s} {run['method']:10s} "
                f"{run['accuracy_before']:.3f} -> {run['accuracy_after']:.3f}  (lr {run['lr']:g}, "
                f"{run['seconds']:.0f} s)")
        doc["runs"] = sorted(doc["runs"] + runs, key=_run_order)
        doc["rows"] = summarize(doc["runs"], chosen)
        doc["seconds"] = time.perf_counter() - t_all
        write_json(results / "zo-adapt.json", doc)
        write_docs(doc, docs)

    s0 = budget.tune_seed
    grid_tasks = [(work, budget, quick, corr, s0, [(name, lr) for lr in lr_grid(name, budget)])
                  for corr in budget.corruptions for name in methods]
    for _, rs in _map_units(grid_tasks, budget.workers):
        best = pick_run(rs, budget.lr.get(rs[0]["method"], 1.0))
        chosen[(best["corruption"], best["method"])] = best["lr"]
        if len(rs) > 1:
            doc["lr_tuning"] = sorted(doc["lr_tuning"] + [
                {k: v for k, v in r.items() if k != "history"} | {"chosen": r is best} for r in rs],
                key=_run_order)
            log(f"[zo-adapt] lr {best['method']} on {best['corruption']}: "
                + ", ".join(f"{r['lr']:g} -> validation {r['best_val_accuracy']:.2f}" for r in rs)
                + f"; chosen {best['lr']:g}")
        record([best] if s0 in budget.seeds else [])
    doc["tuning_seconds"] = time.perf_counter() - t_all
    tasks = [(work, budget, quick, corr, seed, [(name, chosen[(corr, name)]) for name in methods])
             for seed in budget.seeds if seed != s0 for corr in budget.corruptions]
    for _, runs in _map_units(tasks, budget.workers):
        record(runs)
    return doc


def summarize(runs: list[dict[str, Any]], lrs: dict[tuple[str, str], float] | None = None
              ) -> list[dict[str, Any]]:
    """One row per (corruption, method): means over the seeds that finished, and the rate used."""
    rows = []
    keys = sorted({(r["corruption"], r["method"]) for r in runs},
                  key=lambda k: (CORRUPTIONS.index(k[0]) if k[0] in CORRUPTIONS else 99,
                                 ADAPT_METHODS.index(k[1])))
    for corr, name in keys:
        rs = [r for r in runs if r["corruption"] == corr and r["method"] == name]
        steps = max(r["steps"] for r in rs)
        rows.append({"corruption": corr, "method": name,
                     "accuracy_before": float(np.mean([r["accuracy_before"] for r in rs])),
                     "accuracy_after": float(np.mean([r["accuracy_after"] for r in rs])),
                     "accuracy_after_std": float(np.std([r["accuracy_after"] for r in rs])),
                     "seeds": sorted(r["seed"] for r in rs),
                     "lr": (lrs or {}).get((corr, name), rs[0]["lr"]),
                     "forward_passes_per_step": (max(r["forward_passes"] for r in rs) / steps
                                                 if steps else 0)})
    return rows


ABLATION_LR = {"bp-qas": 0.05, "zo": 0.05, "zo-wp": 0.5}
"""Fixed rates of the ablation (no tuning: one corruption, loss curves), as in its committed run."""

ABLATION = (
    ("bp-qas", None),
    ("zo mixture", ZOConfig(perturb="mix")),
    ("layer NP", ZOConfig(perturb="np")),
    ("layer WP", ZOConfig(perturb="wp")),
    ("model WP", ZOConfig(perturb="model-wp")),
    ("zo without GNS", ZOConfig(perturb="mix", gns=False)),
    ("zo without QAS", ZOConfig(perturb="mix", qas=False)),
)


def run_ablation(work: Path, results: Path, quick: bool = False, log=print,
                 docs: Path = Path("docs"), corruption: str = "gaussian_noise") -> dict[str, Any]:
    """The seed's training-loss ablation on one corruption: one curve per variant."""
    from mcutrain.data import adaptation_split, load_dataset
    budget = QUICK if quick else Budget(epochs=5)
    graph, _ = pretrained_model(work, budget, quick)
    ds = load_dataset(f"fashion-mnist-c:{corruption}:5", seed=0)
    x_tr, y_tr, _, _, x_te, y_te = adaptation_split(ds.x_test, ds.y_test, budget.n_train,
                                                            budget.n_val, seed=0, n_test=budget.n_test)
    qm = ptq.quantize_model(graph, ds.clean_train[:512] if not quick else ds.clean_train[:64])
    doc: dict[str, Any] = {"benchmark": "zo-ablation", "quick": quick, "corruption": corruption,
                           "epochs": budget.epochs, "queries": budget.queries, "trainable": TRAINABLE,
                           "seed_reference": {"BP": 1.33, "ZO mixture": 1.40, "layer NP": 1.5,
                                              "layer WP": 1.55, "model WP": 1.8,
                                              "ZO without GNS": 2.9, "ZO without QAS": 4.3},
                           "lr": ABLATION_LR, "rows": []}
    for label, cfg in ABLATION:
        t0 = time.perf_counter()
        if cfg is None:
            m: TrainingMethod = BPQASMethod(qm, BPQASConfig(trainable=TRAINABLE, momentum=0.9))
            lr = ABLATION_LR["bp-qas"]
        else:
            m = ZOMethod(qm, replace(cfg, trainable=TRAINABLE, queries=budget.queries))
            lr = ABLATION_LR["zo-wp" if cfg.perturb in ("wp", "model-wp") else "zo"]
        try:
            r = fit(m, x_tr, y_tr, x_te, y_te, epochs=budget.epochs, batch=100, lr=lr, seed=0,
                    progress=False)
            curve = [h["loss"] for h in r.history]
            row = {"variant": label, "loss_curve": curve, "final_loss": curve[-1],
                   "accuracy_after": r.history[-1]["test_accuracy"], "diverged": False}
        except FloatingPointError:
            row = {"variant": label, "loss_curve": [], "final_loss": None, "accuracy_after": None,
                   "diverged": True}
        row["seconds"] = time.perf_counter() - t0
        row["accuracy_before"] = float(evaluate(m, x_te, y_te)) if row["diverged"] else r.accuracy_before
        doc["rows"].append(row)
        log(f"[zo-ablation] {label:16s} final loss {row['final_loss']}  ({row['seconds']:.0f} s)")
        write_json(results / "zo-ablation.json", doc)
        write_docs(doc, docs)
    return doc


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(doc, indent=1, default=float).encode()
    atomic_write_bytes(path, lambda f: f.write(data))


def adapt_table(doc: dict[str, Any]) -> str:
    """Markdown table: test accuracy (%) after adaptation per corruption and method, mean last."""
    rows = doc["rows"]
    methods = [m for m in ADAPT_METHODS if any(r["method"] == m for r in rows)]
    corrs = [c for c in CORRUPTIONS if any(r["corruption"] == c for r in rows)]
    acc = {(r["corruption"], r["method"]): r["accuracy_after"] for r in rows}
    lines = ["| corruption | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for c in corrs:
        lines.append(f"| {c} | " + " | ".join(f"{100 * acc[(c, m)]:.1f}" if (c, m) in acc else "-"
                                              for m in methods) + " |")
    means = [np.mean([acc[(c, m)] for c in corrs if (c, m) in acc]) for m in methods]
    lines.append("| **mean** | " + " | ".join(f"**{100 * v:.1f}**" for v in means) + " |")
    fpp = {r["method"]: r["forward_passes_per_step"] for r in rows}
    lines.append("| forward passes / step | " + " | ".join(f"{fpp[m]:.0f}" for m in methods) + " |")
    return "\n".join(lines)


def adapt_head(doc: dict[str, Any]) -> str:
    """The paragraph above the zo-adapt table: protocol, learning rates and the two targets."""
    b, rows = doc["budget"], doc["rows"]
    seeds = sorted({s for r in rows for s in r["seeds"]})
    corrs = [c for c in CORRUPTIONS if any(r["corruption"] == c for r in rows)]
    mean = {m: 100 * float(np.mean([r["accuracy_after"] for r in rows if r["method"] == m]))
            for m in {r["method"] for r in rows}}
    counts: dict[str, dict[float, int]] = {}
    for r in rows:
        if r["method"] in b.get("tuned", ()):
            counts.setdefault(r["method"], {}).setdefault(r["lr"], 0)
            counts[r["method"]][r["lr"]] += 1
    lr = "; ".join(f"{m} " + ", ".join(f"{v:g} x{n}" for v, n in sorted(c.items()))
                   for m, c in counts.items())
    tuned = ", ".join(b.get("tuned", ()))
    text = (f"Test accuracy (%) at the best validation epoch, mean of {len(seeds)} seed(s) over "
            f"{len(corrs)} corruption(s) (`mcutrain bench zo-adapt`; "
            f"{doc.get('seconds', 0) / 60:.0f} minutes here, machine shared). small-cnn pretrained in float "
            "on 15,000 clean Fashion-MNIST images "
            "(2 epochs), int8 by PTQ; each corruption at severity 5 on the Fashion-MNIST test set split per "
            f"class into {b['n_train']} train / {b['n_val']} validation / {b['n_test']} test images (the ZO "
            f"seed's protocol); batch 100, {b['epochs']} epochs, cosine learning rate, trainable `conv2` and "
            f"`fc1` (classifier frozen) for every method; ZO with {b['queries']} queries "
            "(the seed used 50). ")
    if tuned:
        text += (f"Learning rates of {tuned}, per corruption: on split seed {b['tune_seed']} each runs "
                 f"{' / '.join(f'{f:g}' for f in b['lr_factors'])} x its grid centre and keeps the run of "
                 "best validation accuracy (never test); the other seeds use that rate; the same grid "
                 f"size and procedure for every method (the grid runs took "
                 f"{doc.get('tuning_seconds', 0) / 60:.0f} minutes). Centres: "
                 + ", ".join(f"{m} {v:g}" for m, v in b["lr"].items() if m in b.get("tuned", ()))
                 + " (set by short probes on validation accuracy). ")
    if lr:
        text += f"Rates chosen (rate x corruptions): {lr}. "
    if "zo-mix" in mean and "bp-qas" in mean and "none" in mean:
        gap, gain = mean["zo-mix"] - mean["bp-qas"], mean["zo-mix"] - mean["none"]
        text += (f"Targets: zo-mix within 1 point of bp-qas ({'met' if gap >= -1 else 'not met'}: "
                 f"{mean['zo-mix']:.1f} vs {mean['bp-qas']:.1f}) and clearly above none "
                 f"({'met' if gain > 5 else 'not met'}: {gain:+.1f} points).")
        acc = {(r["corruption"], r["method"]): 100 * r["accuracy_after"] for r in rows}
        diff = [f"{c} {acc[(c, 'zo-mix')] - acc[(c, 'bp-qas')]:+.1f}" for c in corrs
                if (c, "zo-mix") in acc and (c, "bp-qas") in acc]
        text += f" zo-mix minus bp-qas per corruption (points): {', '.join(diff)}."
        low = {m: sum(1 for r in rows if r["method"] == m and r.get("lr") is not None
                      and np.isclose(r["lr"], min(b["lr_factors"]) * b["lr"][m]))
               for m in ("zo-mix", "bp-qas") if m in b.get("tuned", ())}
        if low:
            text += (" Chosen at the low end of the grid (a lower rate might do better there): "
                     + ", ".join(f"{m} on {n} of {len(corrs)}" for m, n in low.items()) + " corruptions.")
        spread = max((r for r in rows if r["method"] == "zo-mix"), key=lambda r: r["accuracy_after_std"])
        if len(spread["seeds"]) > 1:
            text += (f" Largest seed spread of zo-mix: {spread['corruption']} (std "
                     f"{100 * spread['accuracy_after_std']:.1f} points).")
    return text


def lr_table(doc: dict[str, Any]) -> str:
    """Markdown table of the learning rate each method chose per corruption (split seed 0)."""
    rows = [r for r in doc["rows"] if r["method"] != "none"]
    methods = [m for m in ADAPT_METHODS if any(r["method"] == m for r in rows)]
    corrs = [c for c in CORRUPTIONS if any(r["corruption"] == c for r in rows)]
    lr = {(r["corruption"], r["method"]): r.get("lr") for r in rows}
    lines = ["| learning rate chosen | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for c in corrs:
        lines.append(f"| {c} | " + " | ".join("-" if lr.get((c, m)) is None else f"{lr[(c, m)]:g}"
                                              for m in methods) + " |")
    return "\n".join(lines)


def ablation_table(doc: dict[str, Any]) -> str:
    """Markdown table of the ablation: final training loss and test accuracy per variant."""
    lines = ["| variant | final training loss | test accuracy (%) |", "|---|---|---|"]
    for r in doc["rows"]:
        loss = "diverged" if r["diverged"] else f"{r['final_loss']:.3f}"
        acc = "-" if r["accuracy_after"] is None else f"{100 * r['accuracy_after']:.1f}"
        lines.append(f"| {r['variant']} | {loss} | {acc} |")
    return "\n".join(lines)


def write_docs(doc: dict[str, Any], docs: Path) -> None:
    """The table between `<!-- bench:NAME -->` markers in docs/benchmarks.md, and the figure."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    name = doc["benchmark"]
    fig, ax = plt.subplots(figsize=(10, 4))
    if name == "zo-adapt":
        table = adapt_head(doc) + "\n\n" + adapt_table(doc) + "\n\n" + lr_table(doc)
        rows = doc["rows"]
        methods = [m for m in ADAPT_METHODS if any(r["method"] == m for r in rows)]
        corrs = [c for c in CORRUPTIONS if any(r["corruption"] == c for r in rows)]
        acc = {(r["corruption"], r["method"]): r["accuracy_after"] for r in rows}
        width = 0.8 / len(methods)
        for i, m in enumerate(methods):
            ax.bar(np.arange(len(corrs)) + i * width, [100 * acc.get((c, m), np.nan) for c in corrs],
                   width, label=m)
        ax.set_xticks(np.arange(len(corrs)) + 0.4 - width / 2, corrs, rotation=30, ha="right")
        ax.set_ylabel("test accuracy (%)")
        ax.set_ylim(0, 105)                    # room above the bars for the legend
        ax.legend(ncol=8, fontsize=8, loc="upper center")
        ax.set_title("small-cnn int8, Fashion-MNIST-C severity 5: accuracy after adaptation")
    else:
        for r in doc["rows"]:
            if r["loss_curve"]:
                ax.plot(range(1, len(r["loss_curve"]) + 1), r["loss_curve"], marker="o", label=r["variant"])
        ax.set_xlabel("epoch")
        ax.set_ylabel("training loss")
        ax.set_title(f"ZO ablation on {doc['corruption']} (severity 5)")
        ax.legend(fontsize=8)
        table = ablation_table(doc)
    fig.tight_layout()
    png = docs / f"{name}.png"
    buf = _io.BytesIO()
    fig.savefig(buf, dpi=100)
    plt.close(fig)
    atomic_write_bytes(png, lambda f: f.write(buf.getvalue()))
    md = docs / "benchmarks.md"
    text = md.read_text() if md.exists() else "# Benchmarks\n"
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{table}\n\n![{name}]({name}.png)\n{end}"
    if start in text and end in text:
        text = text[:text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + f"\n\n## {name}\n\n{block}\n"
    atomic_write_bytes(md, lambda f: f.write(text.encode()))



BENCHMARKS = {"zo-adapt": run_adapt, "zo-ablation": run_ablation}


def register(add) -> None:
    """Hook for the benchmark registry: `add(name, func)` with `func(work, results, quick, log)`."""
    for name, func in BENCHMARKS.items():
        add(name, func)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mcutrain.bench_zo")
    p.add_argument("name", choices=sorted(BENCHMARKS))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--work", default="benchmarks/work")
    p.add_argument("--results", default="benchmarks/results")
    p.add_argument("--docs", default="docs", help="where benchmarks.md and the figures go")
    a = p.parse_args(argv)
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    from mcutrain.bench import limit_threads
    with limit_threads(1):                  # as `mcutrain bench`: one BLAS thread on a shared host
        BENCHMARKS[a.name](work, Path(a.results), a.quick, lambda s: print(s, flush=True), Path(a.docs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
