"""Benchmark `zo-cost` (`mcutrain.bench.zo_cost`): the quick run measures every layer and kind; the
table states the MAC share of NP's local weight gradient from the rows."""

from __future__ import annotations

import json

import pytest

from mcutrain.bench import zo_cost as bench_zo_cost


def _row(layer, kind, n, tail, local):
    return {"layer": layer, "kind": kind, "queries": n, "dim": 1, "draws_per_query": 1, "tail_macs": tail,
            "local_macs": local, "step_ms": 2.0, "partial_ms": 0.1, "ratio": 2.0 / (n * 0.1),
            "local_grad_ms": None if kind == "wp" else 0.5, "ratio_without_local_grad": None}


def test_markdown_states_the_local_gradient_share_of_the_passes():
    rows = [_row("conv2", "wp", 10, 1_004_160, None), _row("conv2", "np", 10, 100_992, 903_168),
            _row("conv2", "np", 50, 100_992, 903_168)]
    md = bench_zo_cost.cost_markdown(rows, 100, 15)
    assert "= 0.89 of the n passes' MACs at n = 10 and 0.18 at n = 50." in md
    assert "median of 15 repeats" in md
    assert "| conv2 | np | 10 | 1 | 1 | 100992 | 903168 |" in md
    assert bench_zo_cost.cost_markdown(rows[:1], 100, 15).count("—") >= 2   # no NP rows: dashes


def test_quick_cost_benchmark_measures_every_layer_and_kind(tmp_path, fashion_mnist):
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
