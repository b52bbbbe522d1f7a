"""`fqt-partial` as a sweep: every (task, lambda_min, seed) int8 run with dynamic partial updates is one cell.

The axes are `bench/sweeps/fqt-partial.toml`; the tasks are small-cnn from scratch on Fashion-MNIST
(8k samples, `PARTIAL_SCRATCH_LR`) and the first two `transfer_tasks` (`fqt`), the budget's
`partial_lambdas` and `partial_seeds`. Run through the sweep engine, the cells spread over local
processes or a Ray cluster (`mcutrain bench fqt-partial --ray auto`) and a stopped run resumes from
the sweep's folder (WORK/sweeps/fqt-partial); a run after a complete one starts afresh. The result
file keeps its keys and meaning: one row per (task, lambda_min), the accuracy (mean and std over
seeds) and the backward MACs and time of the run at the first lambda_min (1.0: every row updated)
over those of this one. The backward seconds are measured inside each cell, so they stay in its
timing line, out of its result line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import zoo
from mcutrain.bench import files
from mcutrain.bench.fqt import (
    BUDGET,
    LR,
    PARTIAL_SCRATCH_LR,
    QUICK,
    mean_std,
    task_data,
    train_fqt,
    transfer_tasks,
)
from mcutrain.bench.subset import Only
from mcutrain.bench.sweep_stage import fresh_start, run_cells, sweep_dir
from mcutrain.sweep.spec import keyed_cell

NAME = "fqt-partial"
PRECISION = "int8"


def partial_cell(config: dict[str, Any], target: str | None = None) -> dict[str, Any]:
    """One int8 run of task `task` at `lambda_min` from `seed` (the starting model rebuilt here)."""
    x, y, xt, yt, k, shape = task_data(config["dataset"], config["n_train"], config["n_test"])
    if config["arch"] is not None:          # from scratch: He-initialized from seed 0, as every seed's start
        g0 = zoo.build(config["arch"], k, shape, seed=0)
    else:
        b = QUICK if config["quick"] else BUDGET
        g0 = next(g for _, spec, g in transfer_tasks(Path(config["work"]), b, config["quick"])
                  if spec == config["dataset"])
    r = train_fqt(g0, PRECISION, x, y, xt, yt, epochs=config["epochs"], seed=config["seed"],
                  batch=config["batch"], trainable=config["trainable"], lmin=config["lambda_min"],
                  lr=config["lr"])
    return {"run": {"accuracy": r["accuracy"], "backward_macs": r["backward_macs"]},
            "timing": {"backward_seconds": r["backward_seconds"]}}


def partial_tasks(work: Path, quick: bool) -> list[tuple[str, str, str | None, str, int, int | None, float]]:
    """(task, dataset spec, arch from scratch or None, trainable, epochs, samples, lr) in table order."""
    b = QUICK if quick else BUDGET
    spec0, arch0, epochs0, n0, lr0 = (b.scratch[-1] if quick else
                                      ("fashion-mnist", "small-cnn", 3, 8000, PARTIAL_SCRATCH_LR))
    tasks = [("scratch", spec0, arch0, "all", epochs0, n0, float(lr0))]
    tasks += [(t, s, None, "last:2", b.transfer_epochs, b.transfer_samples, LR)
              for t, s, _ in transfer_tasks(work, b, quick)[:2]]      # the backbones trained here, once
    return tasks


def partial_cells(work: Path, quick: bool, only: Only | None = None):
    """The tasks, the lambdas and the cells in the order of the old loop: task, lambda_min, seed."""
    b = QUICK if quick else BUDGET
    grid = files.sweep_grid(NAME, only)
    lambdas = [lam for lam in (b.partial_lambdas if quick else grid["lambda_min"])
               if lam in grid["lambda_min"]]
    seeds = [s for s in (b.partial_seeds if quick else grid["seed"]) if s in grid["seed"]]
    tasks = [t for t in partial_tasks(work, quick) if t[0] in grid["task"]]
    cells = [keyed_cell({"work": str(work), "quick": quick, "dataset": spec, "arch": arch, "trainable": tr,
                         "epochs": epochs, "n_train": n, "n_test": 200 if quick else b.eval_samples,
                         "lr": lr, "lambda_min": lam, "seed": seed, "batch": b.batch},
                        {"task": task, "lambda_min": lam, "seed": seed}, NAME, ("work",))
             for task, spec, arch, tr, epochs, n, lr in tasks for lam in lambdas for seed in seeds]
    return tasks, lambdas, cells


def run_partial(work: Path, results: Path, quick: bool = False, log=print, docs: Path = Path("docs"),
                ray: str | None = None, only: Only | None = None) -> None:
    """Dynamic partial updates (int8): accuracy and backward cost at lambda_min 1.0 / 0.5 / 0.1 (a sweep)."""
    tasks, lambdas, cells = partial_cells(work, quick, only)
    out = sweep_dir(work, NAME, quick, bool(only))
    fresh_start(files.result_path(results, NAME, quick, bool(only)), out)
    runs = run_cells(NAME, cells, ("task", "lambda_min", "seed"), out, partial_cell,
                     1 if quick else None, ray)
    for r, c in zip(runs, cells):
        log(f"fqt-partial {c.config['dataset']} lambda_min {c.config['lambda_min']} seed "
            f"{c.config['seed']}: {r['accuracy']:.4f} ({r['seconds']:.0f} s)")
    rows = partial_rows(tasks, lambdas, runs, cells)
    files.write_results(results, NAME, rows, quick, bool(only), complete=True, precision=PRECISION,
                        **({"only": only} if only else {}))
    if not quick and not only:
        files.update_docs(docs, NAME, files.markdown_table(
            rows, ["task", "dataset", "lambda_min", "accuracy", "accuracy_std", "accuracy_loss",
                   "backward_macs_ratio", "backward_time_speedup", "epochs", "lr", "seeds"],
            {"accuracy": ".4f", "accuracy_std": ".4f", "accuracy_loss": "+.4f", "backward_macs_ratio": ".2f",
             "backward_time_speedup": ".2f"}))


def partial_rows(tasks, lambdas: list[float], runs: list[dict[str, Any]], cells) -> list[dict[str, Any]]:
    """One row per (task, lambda_min): seeds' mean accuracy, and cost ratios against the task's first
    lambda_min (None when a subset left it out)."""
    rows = []
    for task, spec, _, _, epochs, _, lr in tasks:
        sums = {}
        for lam in lambdas:
            mine = [r for r, c in zip(runs, cells) if c.axes["task"] == task and c.axes["lambda_min"] == lam]
            acc = [r["accuracy"] for r in mine]
            sums[lam] = {"accuracy": float(np.mean(acc)),
                         "backward_macs": sum(r["backward_macs"] for r in mine),
                         "backward_seconds": sum(r["backward_seconds"] for r in mine)}
            full, r = sums.get(BUDGET.partial_lambdas[0]), sums[lam]
            rows.append({"task": task, "dataset": spec, "lambda_min": lam, "accuracy": r["accuracy"],
                         "accuracy_std": mean_std(acc)[1],
                         "accuracy_loss": None if full is None else full["accuracy"] - r["accuracy"],
                         "backward_macs_ratio": None if full is None
                         else full["backward_macs"] / max(r["backward_macs"], 1),
                         "backward_time_speedup": None if full is None
                         else full["backward_seconds"] / max(r["backward_seconds"], 1e-9),
                         "epochs": epochs, "lr": lr, "seeds": len(mine)})
    return rows


def register(add) -> None:
    """Hook for `mcutrain.bench`."""
    add(NAME, run_partial)
