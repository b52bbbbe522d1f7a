"""`update-share`: the plan of runs and the mean over seeds."""

from __future__ import annotations

from mcutrain.bench.update_share import METHODS, ROUNDED, summarize


def _row(method: str, rounding: str, seed: int, after: float, share: float) -> dict:
    return {"task": "digits", "method": method, "update_rounding": rounding, "seed": seed,
            "accuracy_before": 0.5, "accuracy_after": after, "weights_changed_per_step": share}


def test_summary_is_the_mean_over_seeds_in_method_order():
    rows = [_row("bp-qas", "stochastic", 0, 0.7, 0.2), _row("bp-qas", "stochastic", 1, 0.9, 0.4),
            _row("fqt-int8", "-", 0, 0.8, 0.5)]
    s = summarize(rows)
    assert [(r["method"], r["seeds"]) for r in s] == [("fqt-int8", 1), ("bp-qas", 2)]
    assert s[1]["accuracy_after"] == 0.8 and abs(s[1]["accuracy_after_sd"] - 0.1) < 1e-12
    assert abs(s[1]["weights_changed_per_step"] - 0.3) < 1e-12


def test_rounding_is_compared_for_the_methods_that_take_it():
    assert set(ROUNDED) == {m for m, o in METHODS.items() if o["method"] in ("zo", "bp-qas")}
