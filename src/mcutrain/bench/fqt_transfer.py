"""`fqt-transfer` as a sweep: every (task, precision, seed) fine-tuning run is one cell.

The tasks are `fqt.transfer_tasks` (float-pretrained small-cnn backbones, cached in WORK and trained
before the sweep starts); the axes are `bench/sweeps/fqt-transfer.toml`. Run through the sweep
engine, the cells spread over local processes or a Ray cluster (`mcutrain bench fqt-transfer --ray
auto`; each node needs the backbones in the same WORK folder, or trains the same ones) and a stopped
run resumes. The result file keeps its keys and meaning: one row per (task, precision), mean and
std over the seeds, and the docs table of a full run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.bench import files
from mcutrain.bench.fqt import (
    BUDGET,
    LR,
    QUICK,
    mean_std,
    task_data,
    train_fqt,
    transfer_tasks,
    variant_label,
    variants,
)
from mcutrain.bench.subset import Only
from mcutrain.bench.sweep_stage import fresh_start, run_cells, sweep_dir
from mcutrain.sweep.spec import keyed_cell

NAME = "fqt-transfer"
TRAINABLE = "last:2"


def transfer_cell(config: dict[str, Any], target: str | None = None) -> dict[str, Any]:
    """One fine-tuning run of task `dataset` in `precision` from `seed`."""
    b = QUICK if config["quick"] else BUDGET
    g0 = next(g for _, spec, g in transfer_tasks(Path(config["work"]), b, config["quick"])
              if spec == config["dataset"])
    x, y, xt, yt, _, _ = task_data(config["dataset"], config["n_train"], config["n_test"])
    r = train_fqt(g0, config["precision"], x, y, xt, yt, epochs=config["epochs"], seed=config["seed"],
                  batch=config["batch"], trainable=TRAINABLE, update=config["update"])
    return {"run": {"accuracy": r["accuracy"], "accuracy_before": r["accuracy_before"],
                    "train_samples": len(x), "test_samples": len(xt)}}


def run_transfer(work: Path, results: Path, quick: bool = False, log=print, docs: Path = Path("docs"),
                 ray: str | None = None, only: Only | None = None) -> None:
    """Float-pretrained small-cnn, last two layers fine-tuned in every precision (a sweep)."""
    b = QUICK if quick else BUDGET
    grid = files.sweep_grid(NAME, only)
    seeds = tuple(s for s in b.seeds if s in grid["seed"]) if quick else tuple(grid["seed"])
    tasks = [(task, spec) for task, spec, _ in transfer_tasks(work, b, quick)]   # backbones trained here
    fixed = {"work": str(work), "quick": quick, "epochs": b.transfer_epochs, "n_train": b.transfer_samples,
             "n_test": 200 if quick else b.eval_samples, "batch": b.batch}
    cells = [keyed_cell({**fixed, "dataset": spec, "precision": prec, "update": upd, "seed": seed},
                        {"task": spec, "precision": prec, "update": upd, "seed": seed}, NAME, ("work",))
             for _, spec in tasks for prec, upd in variants(grid) for seed in seeds]
    out = sweep_dir(work, NAME, quick, bool(only))
    fresh_start(files.result_path(results, NAME, quick, bool(only)), out)
    runs = run_cells(NAME, cells, ("task", "precision", "update", "seed"), out, transfer_cell,
                     1 if quick else None, ray)
    for r, c in zip(runs, cells):
        label = variant_label(c.config["precision"], c.config["update"])
        log(f"fqt-transfer {c.config['dataset']} {label} seed {c.config['seed']}: "
            f"{r['accuracy_before']:.4f} -> {r['accuracy']:.4f} ({r['seconds']:.0f} s)")
    rows: list[dict[str, Any]] = []
    for task, spec in tasks:
        for prec, upd in variants(grid):
            mine = [r for r, c in zip(runs, cells)
                    if (c.config["dataset"], c.config["precision"], c.config["update"]) == (spec, prec, upd)]
            mean, std = mean_std([r["accuracy"] for r in mine])
            rows.append({"task": task, "dataset": spec, "precision": prec, "update": upd,
                         "accuracy_before": float(np.mean([r["accuracy_before"] for r in mine])),
                         "accuracy": mean, "accuracy_std": std, "seeds": len(mine),
                         "epochs": b.transfer_epochs, "train_samples": mine[0]["train_samples"],
                         "test_samples": mine[0]["test_samples"]})
    files.write_results(results, NAME, rows, quick, bool(only), complete=True, trainable=TRAINABLE, lr=LR,
                        batch=b.batch, **({"only": only} if only else {}))
    if not quick and not only:
        files.update_docs(docs, NAME, files.markdown_table(
            rows, ["task", "dataset", "precision", "update", "accuracy_before", "accuracy", "accuracy_std",
                   "seeds", "epochs", "train_samples", "test_samples"],
            {"accuracy": ".4f", "accuracy_std": ".4f", "accuracy_before": ".4f"}))


def register(add) -> None:
    """Hook for `mcutrain.bench`."""
    add(NAME, run_transfer)
