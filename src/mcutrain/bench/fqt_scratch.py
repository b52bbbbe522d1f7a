"""`fqt-scratch` as a sweep: every (task, seed, precision) trained from random weights is one cell.

The axes are `bench/sweeps/fqt-scratch.toml`; each task's model, epochs, samples and rate come from
`Budget.scratch` (`fqt`). Run through the sweep engine, the cells spread over local processes or a
Ray cluster (`mcutrain bench fqt-scratch --ray auto`) and a stopped run resumes from the sweep's
folder (WORK/sweeps/fqt-scratch); a run after a complete one starts afresh. The result file keeps
its keys and meaning: `runs` (one per cell; `seconds` is the whole cell, data loading included),
`rows` (mean and std over seeds per task and precision), `lr`, `batch`, and the docs table and
`docs/fqt-curves.png` of a full run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import zoo
from mcutrain.bench import files
from mcutrain.bench.fqt import BUDGET, QUICK, lr_of, mean_std, task_data, train_fqt, variant_label, variants
from mcutrain.bench.subset import Only
from mcutrain.bench.sweep_stage import fresh_start, run_cells, sweep_dir
from mcutrain.methods.lr_auto import fqt_rate, run_steps
from mcutrain.sweep.spec import keyed_cell

NAME = "fqt-scratch"
NAME_10EP = "fqt-scratch-10ep"
"""The 10-epoch setting: small-cnn on the full Fashion-MNIST, every precision, 3 seeds
(`bench/sweeps/fqt-scratch-10ep.toml`), at `--lr auto`'s rate for its 18,750 steps."""
TEN_EPOCHS = 10
FASHION_TRAIN = 60000
SCRATCH_10EP = (("fashion-mnist", "small-cnn", TEN_EPOCHS, None,
                 fqt_rate(run_steps(TEN_EPOCHS, FASHION_TRAIN, BUDGET.batch)).lr),)
SCRATCH_10EP_QUICK = (("fashion-mnist", "small-cnn", 1, 300, fqt_rate(run_steps(1, 300, QUICK.batch)).lr),)
"""The quick variant: one epoch on 300 samples, its own auto rate."""
SETTINGS = {NAME: None, NAME_10EP: (SCRATCH_10EP, SCRATCH_10EP_QUICK)}
"""Each setting's tasks (full, quick); None: `Budget.scratch` of `fqt`."""


def scratch_cell(config: dict[str, Any], target: str | None = None) -> dict[str, Any]:
    """One run from scratch: `arch` He-initialized from `seed`, trained by FQT in `precision`."""
    x, y, xt, yt, k, shape = task_data(config["dataset"], config["n_train"], config["n_test"])
    g = zoo.build(config["arch"], k, shape, seed=config["seed"])
    r = train_fqt(g, config["precision"], x, y, xt, yt, epochs=config["epochs"], seed=config["seed"],
                  batch=config["batch"], lr=config["lr"], update=config["update"])
    return {"run": {k: config[k] for k in ("dataset", "precision", "update", "seed", "epochs", "lr")}
            | {"accuracy": r["accuracy"], "curve": [[h["loss"], h["test_accuracy"]] for h in r["history"]]}}


def scratch_cells(quick: bool, only: Only | None = None, name: str = NAME):
    """The cells in the order of the old loop: task, then seed, then precision (those of `only`)."""
    b = QUICK if quick else BUDGET
    grid = files.sweep_grid(name, only)
    setting = SETTINGS[name]
    scratch = b.scratch if setting is None else setting[1 if quick else 0]
    tasks = ([t for t in scratch if t[0] in grid["task"]] if quick
             else [t for task in grid["task"] for t in scratch if t[0] == task])
    seeds = tuple(s for s in b.seeds if s in grid["seed"]) if quick else tuple(grid["seed"])
    cells = []
    for spec, arch, epochs, n, lr in tasks:
        for seed in seeds:
            for prec, upd in variants(grid):
                config = {"dataset": spec, "arch": arch, "epochs": epochs, "n_train": n,
                          "n_test": 200 if quick else None, "lr": lr_of(lr, prec), "precision": prec,
                          "update": upd, "seed": seed, "batch": b.batch}
                axes = {"task": spec, "seed": seed, "precision": prec, "update": upd}
                cells.append(keyed_cell(config, axes, name))
    return b, tasks, cells


def run_scratch(work: Path, results: Path, quick: bool = False, log=print, docs: Path = Path("docs"),
                ray: str | None = None, only: Only | None = None, name: str = NAME) -> None:
    """small-cnn / mnist1d-cnn / digits-cnn from scratch in every precision, 3 seeds (a sweep)."""
    b, tasks, cells = scratch_cells(quick, only, name)
    out = sweep_dir(work, name, quick, bool(only))
    fresh_start(files.result_path(results, name, quick, bool(only)), out)
    runs = run_cells(name, cells, ("task", "seed", "precision", "update"), out, scratch_cell,
                     1 if quick else None, ray)
    for r in runs:
        log(f"{name} {r['dataset']} {variant_label(r['precision'], r['update'])} seed {r['seed']}: "
            f"{r['accuracy']:.4f} ({r['seconds']:.0f} s)")
    rows, curves = rows_and_curves(runs, tasks, variants(files.sweep_grid(name, only)))
    files.write_results(results, name, rows, quick, bool(only), complete=True, runs=runs,
                        lr={t[0]: t[4] for t in tasks}, batch=b.batch, **({"only": only} if only else {}))
    if not quick and not only:
        files.update_docs(docs, name, files.markdown_table(
            rows, ["dataset", "arch", "precision", "update", "accuracy", "accuracy_std", "seeds", "epochs",
                   "lr"],
            {"accuracy": ".4f", "accuracy_std": ".4f"}))
        plot_curves(curves, docs / ("fqt-curves.png" if name == NAME else "fqt-curves-10ep.png"))


def run_scratch_10ep(work: Path, results: Path, quick: bool = False, log=print, docs: Path = Path("docs"),
                     ray: str | None = None, only: Only | None = None) -> None:
    """small-cnn from scratch on the full Fashion-MNIST for 10 epochs, every precision, 3 seeds (a sweep)."""
    run_scratch(work, results, quick, log, docs, ray, only, NAME_10EP)


def rows_and_curves(runs: list[dict[str, Any]], tasks, pairs: list[tuple[str, str]]):
    """One row per (task, precision, update): mean and std over the seeds; the curves per task and
    variant (`variant_label`)."""
    rows, curves = [], {}
    for spec, arch, epochs, _, lr in tasks:
        for prec, upd in pairs:
            mine = [r for r in runs if (r["dataset"], r["precision"], r["update"], r["epochs"], r["lr"])
                    == (spec, prec, upd, epochs, lr_of(lr, prec))]
            if not mine:
                continue
            mean, std = mean_std([r["accuracy"] for r in mine])
            rows.append({"dataset": spec, "arch": arch, "precision": prec, "update": upd, "accuracy": mean,
                         "accuracy_std": std, "seeds": len(mine), "epochs": epochs, "lr": lr_of(lr, prec)})
            curves.setdefault(spec, {})[variant_label(prec, upd)] = [r["curve"] for r in mine]
    return rows, curves


def plot_curves(curves: dict[str, Any], out: Path) -> None:
    """Test accuracy and training loss per epoch, per precision (mean over seeds), one column per dataset."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    specs = list(curves)
    fig, axes = plt.subplots(2, len(specs), figsize=(4.2 * len(specs), 6), squeeze=False)
    for j, spec in enumerate(specs):
        for prec, runs in curves[spec].items():
            arr = np.asarray(runs, np.float64)          # (seeds, epochs, 2)
            ep = np.arange(1, arr.shape[1] + 1)
            axes[0, j].plot(ep, arr[:, :, 1].mean(0), marker="o", label=prec)
            axes[1, j].plot(ep, arr[:, :, 0].mean(0), marker="o", label=prec)
        axes[0, j].set_title(spec)
        axes[0, j].set_ylabel("test accuracy")
        axes[1, j].set_ylabel("training loss")
        axes[1, j].set_xlabel("epoch")
        axes[0, j].legend()
    fig.tight_layout()
    tmp = out.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(out)


def register(add) -> None:
    """Hook for `mcutrain.bench`."""
    add(NAME, run_scratch)
    add(NAME_10EP, run_scratch_10ep)
