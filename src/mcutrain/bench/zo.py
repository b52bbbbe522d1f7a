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

Run: ``mcutrain bench zo-adapt [--quick]`` (or ``zo-ablation``). The protocol itself (budget,
pretrained model, methods) is `zo_protocol`, shared with `zo-cost` (`zo_cost`); the tables and
figures are `zo_docs`.
"""


from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.bench.files import result_path, sweep_grid
from mcutrain.bench.subset import SUFFIX, Only, describe
from mcutrain.bench.sweep_stage import fresh_start, run_cells
from mcutrain.bench.zo_docs import adapt_targets, write_docs
from mcutrain.bench.zo_protocol import (
    ADAPT_METHODS,
    CORRUPTIONS,
    QUICK,
    TRAINABLE,
    Budget,
    make_method,
    pretrained_model,
)
from mcutrain.engines import int_engine, ptq
from mcutrain.errors import UserError
from mcutrain.graph import Graph
from mcutrain.io import atomic_write_bytes
from mcutrain.methods.base import TrainingMethod
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.loop import evaluate, fit
from mcutrain.methods.zo import ZOConfig, ZOMethod
from mcutrain.sweep.spec import keyed_cell


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


ADAPT_DATA_KEYS = ("epochs", "queries", "n_train", "n_val", "n_test", "pretrain_epochs", "pretrain_samples")
"""The budget's fields that change what one run computes: part of every cell's configuration."""


def adapt_cell(config: dict[str, Any], target: str | None = None) -> dict[str, Any]:
    """The sweep cell of one run: method `method` at rate `lr` on (`corruption`, split `seed`).

    The pretrained model comes from its file in `work` (trained before the sweep starts), so a
    cell carries only names and numbers, to a local process or a Ray node alike.
    """
    budget = replace(Budget(), **config["budget"])
    graph, _ = pretrained_model(Path(config["work"]), budget, config["quick"])
    data = _adapt_data(graph, config["corruption"], config["seed"], budget, config["quick"])
    run = _adapt_run(config["method"], graph, data, budget, config["seed"], config["lr"])
    run.pop("seconds")      # measured: the cell's timing holds it
    return {"run": run | {"corruption": config["corruption"]}}


def _adapt_sweep(name: str, jobs: list[tuple[str, str, int, float]], work: Path, budget: Budget,
                 quick: bool, ray: str | None) -> list[dict[str, Any]]:
    """Run (corruption, method, seed, lr) `jobs` as one sweep in WORK/sweeps/NAME; their run records.

    Finished cells of an interrupted run are kept in the folder and not run again.
    """
    fixed = {"work": str(work), "quick": quick, "budget": {k: getattr(budget, k) for k in ADAPT_DATA_KEYS}}
    cells = [keyed_cell({**fixed, "corruption": c, "method": m, "seed": s, "lr": lr},
                        {"corruption": c, "method": m, "seed": s, "lr": lr}, "zo-adapt", ("work",))
             for c, m, s, lr in jobs]
    return run_cells(name, cells, ("corruption", "method", "seed", "lr"), work / "sweeps" / name, adapt_cell,
                     budget.workers, ray)


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


def run_adapt(work: Path, results: Path, quick: bool = False, log=print, docs: Path = Path("docs"),
              budget: Budget | None = None, ray: str | None = None, only: Only | None = None
              ) -> dict[str, Any]:
    """The `zo-adapt` benchmark: its sweep file (`bench/sweeps/zo-adapt.toml`) in two stages.

    Learning rates are chosen per corruption and method by validation accuracy:
    on split seed `tune_seed` every tuned method runs its whole grid
    (`lr_grid`) and keeps the run of best validation accuracy (`pick_run`) as
    that seed's result; the other seeds run at the chosen rate. Test accuracy
    never takes part in a choice. Each stage is a sweep (WORK/sweeps/zo-adapt-tune, -seeds), so
    `ray` (an address or 'auto') spreads the runs over a Ray cluster and a stopped run resumes
    (`"complete": false` in the result file); after a complete run the next one starts afresh.
    `only` (`subset`) runs part of the grid into zo-adapt.subset.json, the docs left alone.
    """
    grid = sweep_grid("zo-adapt", only)
    if budget is None:
        budget = QUICK if quick else Budget()
        budget = replace(budget, corruptions=tuple(c for c in grid["corruption"] if not quick or c in
                                                   budget.corruptions),
                         seeds=tuple(s for s in grid["seed"] if not quick or s in budget.seeds))
    if not budget.corruptions or not budget.seeds:
        raise UserError(f"zo-adapt --quick runs corruption {', '.join(QUICK.corruptions)} and seed "
                        f"{', '.join(map(str, QUICK.seeds))} only: nothing of {describe(only or {})}")
    _, meta = pretrained_model(work, budget, quick)          # trained once, before the workers start
    methods = [m for m in ADAPT_METHODS if m in grid["method"] and (m != "fqt-int8" or _fqt_available())]
    budget = replace(budget, tuned=tuple(m for m in budget.tuned if m in methods))
    doc: dict[str, Any] = {"benchmark": "zo-adapt", "quick": quick, "arch": "small-cnn",
                           "pretrained": meta, "budget": {k: v for k, v in budget.__dict__.items()},
                           "trainable": TRAINABLE, "runs": [], "rows": [], "lr_tuning": []}
    t_all = time.perf_counter()
    chosen: dict[tuple[str, str], float] = {}
    suffix = ("-quick" if quick else "") + (f"-{SUFFIX}" if only else "")
    out_file = result_path(results, "zo-adapt", quick, True) if only else results / "zo-adapt.json"
    if only:
        doc["only"] = only
    fresh_start(out_file,
                *(work / "sweeps" / f"zo-adapt-{stage}{suffix}" for stage in ("tune", "seeds")))

    def record(runs: list[dict[str, Any]]) -> None:
        for run in runs:
            log(f"[zo-adapt] seed {run['seed']} {run['corruption']:18s} {run['method']:10s} "
                f"{run['accuracy_before']:.3f} -> {run['accuracy_after']:.3f}  (lr {run['lr']:g}, "
                f"{run['seconds']:.0f} s)")
        doc["runs"] = sorted(doc["runs"] + runs, key=_run_order)
        doc["rows"] = summarize(doc["runs"], chosen)
        doc["targets"] = adapt_targets(doc, list(budget.corruptions))
        doc["seconds"] = time.perf_counter() - t_all
        doc["complete"] = False
        write_json(out_file, doc)
        if not only:
            write_docs(doc, docs)

    s0 = budget.tune_seed
    tune = _adapt_sweep(f"zo-adapt-tune{suffix}", [(corr, name, s0, lr) for corr in budget.corruptions
                                                   for name in methods for lr in lr_grid(name, budget)],
                        work, budget, quick, ray)
    best_runs = []
    for corr in budget.corruptions:
        for name in methods:
            rs = [r for r in tune if r["corruption"] == corr and r["method"] == name]
            best = pick_run(rs, budget.lr.get(name, 1.0))
            chosen[(corr, name)] = best["lr"]
            best_runs.append(best)
            if len(rs) > 1:
                doc["lr_tuning"] = sorted(doc["lr_tuning"] + [
                    {k: v for k, v in r.items() if k != "history"} | {"chosen": r is best} for r in rs],
                    key=_run_order)
                log(f"[zo-adapt] lr {name} on {corr}: "
                    + ", ".join(f"{r['lr']:g} -> validation {r['best_val_accuracy']:.2f}" for r in rs)
                    + f"; chosen {best['lr']:g}")
    record(best_runs if s0 in budget.seeds else [])
    doc["tuning_seconds"] = time.perf_counter() - t_all
    jobs = [(corr, name, seed, chosen[(corr, name)]) for seed in budget.seeds if seed != s0
            for corr in budget.corruptions for name in methods]
    if jobs:
        record(_adapt_sweep(f"zo-adapt-seeds{suffix}", jobs, work, budget, quick, ray))
    doc["complete"] = True
    write_json(out_file, doc)
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


BENCHMARKS = {"zo-adapt": run_adapt, "zo-ablation": run_ablation}


def register(add) -> None:
    """Hook for the benchmark registry: `add(name, func)` with `func(work, results, quick, log, docs)`."""
    for name, func in BENCHMARKS.items():
        add(name, func)
