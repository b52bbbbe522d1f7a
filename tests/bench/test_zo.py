"""The ZO accuracy benchmarks (`mcutrain.bench.zo`): `--quick` runs end to end (under a minute),
and the per-corruption choice of learning rates by validation accuracy."""

from __future__ import annotations

import json
from dataclasses import replace

from mcutrain.bench import zo as bench_zo
from mcutrain.bench.files import limit_threads


def test_quick_benchmarks_write_results_table_and_figure(tmp_path, fashion_mnist):
    docs = tmp_path / "docs"
    docs.mkdir()
    doc = bench_zo.run_adapt(tmp_path, tmp_path / "results", quick=True, log=lambda s: None, docs=docs)
    rows = json.loads((tmp_path / "results" / "zo-adapt.json").read_text())["rows"]
    assert {r["method"] for r in rows} >= {"none", "zo-mix", "bp-qas", "float32"}
    assert all(0 <= r["accuracy_after"] <= 1 for r in rows)
    mix = next(r for r in rows if r["method"] == "zo-mix")
    assert mix["forward_passes_per_step"] == 1 + 2 * 2        # base pass + 2 queries x 2 layers
    assert doc["rows"] == rows
    text = (docs / "benchmarks.md").read_text()
    assert "<!-- bench:zo-adapt -->" in text and "| gaussian_noise |" in text
    assert "| learning rate chosen | zo-wp |" in text and "zo-mix minus bp-qas per corruption" in text
    assert (docs / "zo-adapt.png").stat().st_size > 1000


def test_rates_are_picked_per_corruption_by_validation_never_test(monkeypatch, tmp_path):
    """Each tuned method keeps, per corruption, the grid run of best validation accuracy; ties go to
    the centre; the other seeds run at that rate."""
    val = {("c0", 0.1): 0.7, ("c0", 0.2): 0.9, ("c0", 0.4): 0.5,
           ("c1", 0.1): 0.6, ("c1", 0.2): 0.6, ("c1", 0.4): 0.6}
    calls = []

    def fake_run(name, graph, data, budget, seed, lr):
        calls.append((name, data, seed, lr))
        return {"method": name, "seed": seed, "lr": lr, "accuracy_before": 0.1, "steps": 1, "history": [],
                "accuracy_after": 0.99 if lr == 0.4 else 0.5,            # best on test, never chosen
                "forward_passes": 1, "seconds": 0.0, "best_val_accuracy": val.get((data, lr), 0.3)}

    monkeypatch.setattr(bench_zo, "pretrained_model", lambda work, budget, quick: (None, {}))
    monkeypatch.setattr(bench_zo, "_adapt_data", lambda g, corr, seed, b, quick: corr)
    monkeypatch.setattr(bench_zo, "_adapt_run", fake_run)
    monkeypatch.setattr(bench_zo, "CORRUPTIONS", ("c0", "c1"))
    monkeypatch.setattr(bench_zo, "write_docs", lambda doc, docs: None)
    monkeypatch.setattr(bench_zo, "ADAPT_METHODS", ("none", "zo-mix", "float32"))
    budget = replace(bench_zo.Budget(), tuned=("zo-mix",), corruptions=("c0", "c1"), seeds=(0, 1), workers=1)
    doc = bench_zo.run_adapt(tmp_path, tmp_path, log=lambda s: None, docs=tmp_path, budget=budget)
    lr = {(r["corruption"], r["method"]): r["lr"] for r in doc["rows"]}
    assert lr == {("c0", "none"): 0.0, ("c0", "zo-mix"): 0.2, ("c0", "float32"): 1e-3,
                  ("c1", "none"): 0.0, ("c1", "zo-mix"): 0.2, ("c1", "float32"): 1e-3}
    assert sorted(c[3] for c in calls if c[0] == "zo-mix" and c[2] == 0) == [0.1, 0.1, 0.2, 0.2, 0.4, 0.4]
    assert sorted(c[3] for c in calls if c[0] == "zo-mix" and c[2] == 1) == [0.2, 0.2]
    assert len(doc["lr_tuning"]) == 6 and sum(r["chosen"] for r in doc["lr_tuning"]) == 2
    assert all(r["accuracy_after"] == 0.5 for r in doc["rows"] if r["method"] == "zo-mix")
    assert [r["seed"] for r in doc["runs"]] == [0] * 6 + [1] * 6


def test_units_on_two_processes_give_the_same_runs_as_one(tmp_path, fashion_mnist):
    budget = replace(bench_zo.QUICK, corruptions=("gaussian_noise", "fog"))
    one = bench_zo.run_adapt(tmp_path / "w1", tmp_path / "r1", quick=True, log=lambda s: None, docs=tmp_path,
                             budget=budget)
    two = bench_zo.run_adapt(tmp_path / "w2", tmp_path / "r2", quick=True, log=lambda s: None, docs=tmp_path,
                             budget=replace(budget, workers=2))
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in one["runs"]]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in two["runs"]]
    assert [(r["corruption"], r["method"]) for r in one["runs"]][:2] == [("gaussian_noise", "none"),
                                                                         ("gaussian_noise", "zo-wp")]


def test_sweep_cells_give_the_numbers_of_the_old_per_unit_loop(tmp_path, fashion_mnist):
    """One corruption and seed of the quick budget: every method run as its own sweep cell (its own
    process, its data prepared in the cell) gives the run of the loop the benchmark had before (the
    data of a (corruption, seed) prepared once, the methods trained on it in turn), same rates."""
    budget = replace(bench_zo.QUICK, workers=2)
    doc = bench_zo.run_adapt(tmp_path, tmp_path / "r", quick=True, log=lambda s: None, docs=tmp_path,
                             budget=budget)
    # NOTE: as `mcutrain bench` and every sweep cell do: the calibration's float32 forward (BLAS)
    # rounds differently on more threads, and then the int8 model's ranges differ
    with limit_threads(1):
        graph, _ = bench_zo.pretrained_model(tmp_path, budget, True)
        data = bench_zo._adapt_data(graph, "gaussian_noise", 0, budget, True)
        old = [bench_zo._adapt_run(r["method"], graph, data, budget, 0, r["lr"]) for r in doc["runs"]]

    def strip(runs):
        return [{k: v for k, v in r.items() if k not in ("seconds", "corruption")} for r in runs]
    assert len(doc["runs"]) == len(bench_zo.ADAPT_METHODS)
    assert json.loads(json.dumps(strip(old))) == json.loads(json.dumps(strip(doc["runs"])))
    assert doc["complete"] is True


def test_sweep_file_declares_the_protocol_axes():
    from mcutrain.bench.files import sweep_grid
    grid = sweep_grid("zo-adapt")
    assert tuple(grid["corruption"]) == bench_zo.CORRUPTIONS == bench_zo.Budget().corruptions
    assert tuple(grid["method"]) == bench_zo.ADAPT_METHODS
    assert tuple(grid["seed"]) == bench_zo.Budget().seeds


def test_quick_subset_runs_the_methods_asked_into_its_own_file(tmp_path, fashion_mnist):
    """`--only method=zo-mix --only method=none`: those methods' cells only, in zo-adapt.quick.subset.json;
    neither the complete result file nor the docs are written."""
    docs = tmp_path / "docs"
    doc = bench_zo.run_adapt(tmp_path / "w", tmp_path / "r", quick=True, log=lambda s: None, docs=docs,
                             only={"method": ["zo-mix", "none"]})
    assert [p.name for p in (tmp_path / "r").iterdir()] == ["zo-adapt.quick.subset.json"]
    assert json.loads((tmp_path / "r" / "zo-adapt.quick.subset.json").read_text())["rows"] == doc["rows"]
    assert [r["method"] for r in doc["runs"]] == ["none", "zo-mix"] and doc["complete"] is True
    assert doc["only"] == {"method": ["zo-mix", "none"]} and not docs.exists()
    assert (tmp_path / "w" / "sweeps" / "zo-adapt-tune-quick-subset").is_dir()
