"""`fqt-scratch` as a sweep: the quick run writes the result file it always wrote, with the numbers
of the loop it had before (same data, seeds and rates, every precision, int8 with each update)."""

from __future__ import annotations

import json

from mcutrain import zoo
from mcutrain.bench import fqt_scratch
from mcutrain.bench.fqt import QUICK, lr_of, task_data, train_fqt
from mcutrain.methods.fqt_state import PRECISIONS, UPDATES

VARIANTS = [(p, u) for p in PRECISIONS for u in UPDATES if p == "int8" or u == "float"]


def test_quick_sweep_gives_the_runs_of_the_old_loop(tmp_path):
    fqt_scratch.run_scratch(tmp_path / "work", tmp_path / "results", quick=True, log=lambda s: None,
                            docs=tmp_path / "docs")
    doc = json.loads((tmp_path / "results" / "fqt-scratch.quick.json").read_text())
    assert set(doc) == {"benchmark", "rows", "complete", "runs", "lr", "batch"} and doc["complete"] is True
    (spec, arch, epochs, n, lr), = QUICK.scratch
    x, y, xt, yt, k, shape = task_data(spec, n, 200)        # the old loop: data once, then seed, precision
    old = []
    for seed in QUICK.seeds:
        for prec, upd in VARIANTS:
            r = train_fqt(zoo.build(arch, k, shape, seed=seed), prec, x, y, xt, yt, epochs=epochs, seed=seed,
                          batch=QUICK.batch, lr=lr_of(lr, prec), update=upd)
            old.append({"dataset": spec, "precision": prec, "update": upd, "seed": seed, "epochs": epochs,
                        "lr": lr_of(lr, prec), "accuracy": r["accuracy"],
                        "curve": [[h["loss"], h["test_accuracy"]] for h in r["history"]]})
    new = [{k: v for k, v in r.items() if k != "seconds"} for r in doc["runs"]]
    assert new == json.loads(json.dumps(old))
    assert [(r["precision"], r["update"], r["seeds"]) for r in doc["rows"]] == [(*v, 1) for v in VARIANTS]
    assert not (tmp_path / "docs").exists()        # a quick run leaves the docs alone


def test_sweep_file_declares_every_task_and_precision_of_the_budget():
    from mcutrain.bench.files import sweep_grid
    from mcutrain.bench.fqt import BUDGET
    grid = sweep_grid("fqt-scratch")
    assert grid["task"] == [t[0] for t in BUDGET.scratch] and grid["precision"] == list(PRECISIONS)
    assert grid["seed"] == list(BUDGET.seeds) and grid["update"] == list(UPDATES)


def test_ten_epoch_setting_is_the_full_fashion_mnist_at_the_auto_rate():
    from mcutrain.bench.files import sweep_grid
    from mcutrain.bench.fqt import BUDGET
    from mcutrain.methods.lr_auto import fqt_rate
    grid = sweep_grid(fqt_scratch.NAME_10EP)
    assert grid == {"task": ["fashion-mnist"], "seed": [0, 1, 2], "precision": list(PRECISIONS),
                    "update": ["float"]}
    _, tasks, cells = fqt_scratch.scratch_cells(False, None, fqt_scratch.NAME_10EP)
    (spec, arch, epochs, n, lr), = tasks
    assert (spec, arch, epochs, n) == ("fashion-mnist", "small-cnn", 10, None)
    assert lr == fqt_rate(10 * 60000 // BUDGET.batch).lr and len(cells) == 12
