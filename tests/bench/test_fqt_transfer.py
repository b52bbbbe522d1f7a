"""`fqt-transfer` as a sweep: the quick run's rows are those of the loop it had before (same backbones,
data, seeds and rates, every precision)."""

from __future__ import annotations

import json

import numpy as np

from mcutrain.bench import fqt_transfer
from mcutrain.bench.files import sweep_grid
from mcutrain.bench.fqt import QUICK, mean_std, task_data, train_fqt, transfer_tasks
from mcutrain.methods.fqt_state import PRECISIONS, UPDATES


def test_quick_sweep_gives_the_rows_of_the_old_loop(tmp_path, fashion_mnist):
    work = tmp_path / "work"
    fqt_transfer.run_transfer(work, tmp_path / "results", quick=True, log=lambda s: None, docs=tmp_path / "d")
    doc = json.loads((tmp_path / "results" / "fqt-transfer.quick.json").read_text())
    assert set(doc) == {"benchmark", "rows", "complete", "trainable", "lr", "batch"} and doc["complete"]
    old = []
    for task, spec, g0 in transfer_tasks(work, QUICK, True):     # the old loop, on the cached backbones
        x, y, xt, yt, _, _ = task_data(spec, QUICK.transfer_samples, 200)
        for prec, upd in [(p, u) for p in PRECISIONS for u in UPDATES if p == "int8" or u == "float"]:
            rs = [train_fqt(g0, prec, x, y, xt, yt, epochs=QUICK.transfer_epochs, seed=s, batch=QUICK.batch,
                            trainable="last:2", update=upd) for s in QUICK.seeds]
            mean, std = mean_std([r["accuracy"] for r in rs])
            old.append({"task": task, "dataset": spec, "precision": prec, "update": upd,
                        "accuracy_before": float(np.mean([r["accuracy_before"] for r in rs])),
                        "accuracy": mean, "accuracy_std": std, "seeds": len(rs),
                        "epochs": QUICK.transfer_epochs, "train_samples": len(x), "test_samples": len(xt)})
    assert doc["rows"] == json.loads(json.dumps(old))
    assert sweep_grid("fqt-transfer")["precision"] == list(PRECISIONS)
    assert sweep_grid("fqt-transfer")["update"] == list(UPDATES)
