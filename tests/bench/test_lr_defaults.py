"""`lr-defaults --quick`: every case trains at the default rate and at each rate of its grid."""

from __future__ import annotations

import json

from mcutrain.bench import lr_defaults


def test_quick_run_writes_default_against_grid(tmp_path):
    lr_defaults.run(tmp_path / "work", tmp_path / "results", quick=True, log=lambda s: None,
                    docs=tmp_path / "docs")
    doc = json.loads((tmp_path / "results" / "lr-defaults.quick.json").read_text())
    assert doc["complete"] is True and len(doc["rows"]) == len(lr_defaults.QUICK.cases)
    for row in doc["rows"]:
        grid = lr_defaults.GRIDS[row["method"]]
        assert list(row["grid"]) == [f"{lr:g}" for lr in grid] and row["best_lr"] in grid
        assert row["lr_reason"].startswith("auto")
        assert row["gap_points"] == 100 * (row["best_accuracy"] - row["default_accuracy"])
    assert not (tmp_path / "docs").exists()        # a quick run leaves the docs alone
