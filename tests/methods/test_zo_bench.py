"""The `--quick` variants of the ZO benchmarks run end to end (under a minute)."""

from __future__ import annotations

import json

import pytest

from mcutrain import bench_zo, bench_zo_cost


def _have_fashion() -> bool:
    from mcutrain.data import load_dataset
    try:
        load_dataset("fashion-mnist", seed=0)
    except Exception:
        return False
    return True


@pytest.mark.skipif(not _have_fashion(), reason="Fashion-MNIST files not found")
def test_quick_benchmarks_write_results_table_and_figure(tmp_path):
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
    assert (docs / "zo-adapt.png").stat().st_size > 1000


@pytest.mark.skipif(not _have_fashion(), reason="Fashion-MNIST files not found")
def test_quick_cost_benchmark_measures_every_layer_and_kind(tmp_path):
    bench_zo_cost.run_cost(tmp_path, tmp_path / "results", quick=True, log=lambda s: None, docs=tmp_path)
    doc = json.loads((tmp_path / "results" / "zo-cost.quick.json").read_text())
    rows = doc["rows"]
    want = {(c, k) for c in bench_zo_cost.COST_LAYERS for k in ("wp", "np")}
    assert {(r["layer"], r["kind"]) for r in rows} == want
    for r in rows:
        assert r["step_ms"] > 0 and r["partial_ms"] > 0
        assert r["ratio"] == pytest.approx(r["step_ms"] / (r["queries"] * r["partial_ms"]))
        assert (r["local_grad_ms"] is None) == (r["kind"] == "wp")
    conv2_np = next(r for r in rows if r["layer"] == "conv2" and r["kind"] == "np")
    assert conv2_np["draws_per_query"] == -(-10 * 14 * 14 * 32 // 32)    # batch 10, 32 signs per draw
    assert not (tmp_path / "benchmarks.md").exists()                       # quick runs leave the docs alone
