"""The zo-cost table: the MAC share of NP's local weight gradient is stated from the rows."""

from __future__ import annotations

from mcutrain import bench_zo_cost


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
