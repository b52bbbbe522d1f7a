"""`fqt-partial` as a sweep: the quick run's rows are those of the loop it had before (same models, data,
seeds, rates and lambdas); the backward seconds, measured, stay in the cells' timing lines."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.bench import fqt_partial
from mcutrain.bench.files import sweep_grid
from mcutrain.bench.fqt import BUDGET, LR, QUICK, mean_std, task_data, train_fqt, transfer_tasks
from mcutrain.errors import UserError
from mcutrain.sweep import store

MEASURED = "backward_time_speedup"


def old_loop_rows(work) -> list[dict]:
    """The loop `run_partial` had before it was a sweep, on the cached backbones (quick budget)."""
    b = QUICK
    spec0, arch0, epochs0, n0, lr0 = b.scratch[-1]
    _, _, _, _, k, shape = task_data(spec0, 1, 1)
    tasks = [("scratch", spec0, zoo.build(arch0, k, shape, seed=0), "all", epochs0, n0, lr0)]
    tasks += [(t, s, g, "last:2", b.transfer_epochs, b.transfer_samples, LR)
              for t, s, g in transfer_tasks(work, b, True)[:2]]
    rows = []
    for kind, spec, g0, trainable, epochs, n, lr in tasks:
        x, y, xt, yt, _, _ = task_data(spec, n, 200)
        full = None
        for lam in b.partial_lambdas:
            runs = [train_fqt(g0, "int8", x, y, xt, yt, epochs=epochs, seed=s, batch=b.batch,
                              trainable=trainable, lmin=lam, lr=lr) for s in b.partial_seeds]
            r = {"accuracy": float(np.mean([q["accuracy"] for q in runs])),
                 "accuracy_std": mean_std([q["accuracy"] for q in runs])[1],
                 "backward_macs": sum(q["backward_macs"] for q in runs)}
            full = full or r
            rows.append({"task": kind, "dataset": spec, "lambda_min": lam, "accuracy": r["accuracy"],
                         "accuracy_std": r["accuracy_std"], "accuracy_loss": full["accuracy"] - r["accuracy"],
                         "backward_macs_ratio": full["backward_macs"] / max(r["backward_macs"], 1),
                         "epochs": epochs, "lr": lr, "seeds": len(runs)})
    return rows


def test_quick_sweep_gives_the_rows_of_the_old_loop(tmp_path, fashion_mnist):
    work = tmp_path / "work"
    fqt_partial.run_partial(work, tmp_path / "results", quick=True, log=lambda s: None, docs=tmp_path / "d")
    doc = json.loads((tmp_path / "results" / "fqt-partial.quick.json").read_text())
    assert set(doc) == {"benchmark", "rows", "complete", "precision"} and doc["complete"] is True
    assert all(r[MEASURED] > 0 for r in doc["rows"])
    new = [{k: v for k, v in r.items() if k != MEASURED} for r in doc["rows"]]
    assert new == json.loads(json.dumps(old_loop_rows(work)))
    folder = work / "sweeps" / "fqt-partial-quick"
    assert all("backward_seconds" in t for t in store.read_lines(folder / store.TIMINGS))
    assert not any("backward_seconds" in line["run"] for line in store.latest(folder).values())
    assert not (tmp_path / "d").exists()


def test_subset_runs_part_of_the_grid_into_its_own_file(tmp_path, fashion_mnist):
    """`--only task=scratch --only lambda_min=0.1`: one cell, in fqt-partial.quick.subset.json; the
    ratios against lambda_min 1.0, left out, are None rather than against another rate."""
    only = {"task": ["scratch"], "lambda_min": ["0.1"]}
    fqt_partial.run_partial(tmp_path / "work", tmp_path / "results", quick=True, log=lambda s: None,
                            docs=tmp_path / "d", only=only)
    assert [p.name for p in (tmp_path / "results").iterdir()] == ["fqt-partial.quick.subset.json"]
    doc = json.loads((tmp_path / "results" / "fqt-partial.quick.subset.json").read_text())
    (row,) = doc["rows"]
    assert (row["task"], row["lambda_min"], row["seeds"], doc["only"]) == ("scratch", 0.1, 1, only)
    assert row["backward_macs_ratio"] is None and row["accuracy_loss"] is None


def test_unknown_axis_or_value_is_refused_naming_the_axes(tmp_path):
    with pytest.raises(UserError, match="its axes: task, lambda_min, seed"):
        fqt_partial.partial_cells(tmp_path, True, {"lambda": ["0.1"]})
    with pytest.raises(UserError, match=r"the values of lambda_min: 1\.0, 0\.5, 0\.1"):
        fqt_partial.partial_cells(tmp_path, True, {"lambda_min": ["0.2"]})


def test_sweep_file_declares_the_lambdas_and_seeds_of_the_budget():
    grid = sweep_grid("fqt-partial")
    assert grid["lambda_min"] == list(BUDGET.partial_lambdas) and grid["seed"] == list(BUDGET.partial_seeds)
    assert grid["task"][0] == "scratch" and len(grid["task"]) == 3
