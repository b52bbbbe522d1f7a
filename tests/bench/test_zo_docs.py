"""zo-adapt's targets as the docs state them: gaps to bp-qas and diverged runs."""

from __future__ import annotations

from mcutrain.bench import zo_docs


def _row(corr: str, method: str, after: float) -> dict:
    return {"corruption": corr, "method": method, "accuracy_before": 0.5, "accuracy_after": after}


def _run(corr: str, method: str, after: float, losses: list[float]) -> dict:
    return _row(corr, method, after) | {"history": [{"loss": v} for v in losses]}


def test_gaps_are_points_below_bp_qas_mean_and_worst():
    rows = [_row("fog", "bp-qas", 0.80), _row("fog", "zo-mix", 0.78), _row("fog", "zo-sparse", 0.70),
            _row("zigzag", "bp-qas", 0.70), _row("zigzag", "zo-mix", 0.65), _row("zigzag", "zo-sparse", 0.70)]
    t = zo_docs.adapt_targets({"rows": rows, "runs": []}, ["fog", "zigzag"])
    assert round(t["zo_mix_gap"], 6) == -3.5 and round(t["zo_mix_worst_gap"], 6) == -5.0
    assert round(t["zo_sparse_gap"], 6) == -5.0
    assert t["met"] == {"zo_mix_mean": False, "zo_mix_worst": False, "zo_sparse_mean": False,
                        "none_diverged": True}


def test_a_rising_loss_or_a_collapse_is_divergence_a_small_drop_is_not():
    runs = [_run("fog", "zo-np", 0.60, [1.0, 1.2]),          # loss rose
            _run("fog", "zo-wp", 0.40, [1.0, 0.5]),          # 10 points below its start
            _run("jpeg_compression", "bp-qas", 0.49, [1.0, 0.9]),
            _run("zigzag", "zo-mix", 0.60, [1.0, float("nan")])]
    t = zo_docs.adapt_targets({"rows": [], "runs": runs}, [])
    assert t["diverged"] == ["zo-mix on zigzag", "zo-np on fog", "zo-wp on fog"]
    assert t["met"]["none_diverged"] is False
