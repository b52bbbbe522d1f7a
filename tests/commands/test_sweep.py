"""`mcutrain sweep` and `mcutrain report SWEEP_DIR` on the command line: output, --json keys, refusals."""

from __future__ import annotations

import json

from mcutrain import cli
from mcutrain.sweep.spec import parse_sweep

TWO = """
[base]
arch = "digits-cnn"
dataset = "digits"
epochs = 1
train_samples = 100
test_samples = 60

[grid]
lr = [0.01, 0.02]
seed = [0, 1]
"""


def test_example_is_a_valid_sweep_of_2_methods_2_rates_2_seeds(capsys):
    assert cli.main(["sweep", "--example"]) == 0
    spec = parse_sweep(capsys.readouterr().out, "example.toml")
    assert len(spec.cells) == 8 and spec.axes == ("method", "lr", "seed") and spec.target == "nrf52840"
    assert {c.config["method"] for c in spec.cells} == {"fqt", "zo"}
    assert {c.config["dataset"] for c in spec.cells} == {"digits"}


def test_sweep_json_then_report_with_heatmap(tmp_path, capsys):
    f = tmp_path / "two.toml"
    f.write_text(TWO)
    out = tmp_path / "out"
    assert cli.main(["sweep", str(f), "-o", str(out), "--workers", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {k: doc[k] for k in ("cells", "done", "skipped", "failed")} == {
        "cells": 4, "done": 4, "skipped": 0, "failed": 0}
    assert cli.main(["sweep", str(f), "-o", str(out)]) == 0
    assert "4 cells, 0 done, 4 skipped" in capsys.readouterr().out
    assert cli.main(["report", str(out), "--heatmap", "lr,seed", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [(r["lr"], r["seeds"]) for r in rep["rows"]] == [("0.01", 2), ("0.02", 2)]
    accs = [c["accuracy"] for c in rep["cells"] if c["lr"] == 0.01]
    assert rep["rows"][0]["accuracy"] == sum(accs) / 2
    for name in ("accuracy.png", "heatmap.png", "sweep.md", "sweep.json"):
        assert (out / "report" / name).stat().st_size > 0
    assert "| lr | accuracy | accuracy_std | seeds | failed |" in (out / "report" / "sweep.md").read_text()


def test_refusals_are_one_line_messages(tmp_path, capsys):
    f = tmp_path / "two.toml"
    f.write_text(TWO)
    assert cli.main(["sweep", str(f)]) == 1
    assert "give a sweep file and a results folder" in capsys.readouterr().err
    assert cli.main(["sweep", str(f), "-o", str(tmp_path / "o"), "--workers", "2", "--ray", "auto"]) == 1
    assert "--workers is for local processes" in capsys.readouterr().err
    (tmp_path / "bad.toml").write_text(TWO.replace("lr =", "rate ="))
    assert cli.main(["sweep", str(tmp_path / "bad.toml"), "-o", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "bad.toml" in err and "'rate'" in err and "Traceback" not in err
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "results.jsonl").write_text("")
    assert cli.main(["report", str(tmp_path / "s"), "--heatmap", "lr"]) == 1
    assert "--heatmap 'lr': give two different axes" in capsys.readouterr().err
    assert cli.main(["report", str(tmp_path), "--heatmap", "lr,seed"]) == 1
    assert "--heatmap is for a sweep's folder" in capsys.readouterr().err
