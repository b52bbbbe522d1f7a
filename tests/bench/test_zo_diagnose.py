"""`zo-diagnose` (`mcutrain.bench.zo_diagnose`): the quick run traces every step of both limits, and
the traced update obeys the limit it ran with."""

from __future__ import annotations

import json

from mcutrain.bench import zo_diagnose


def test_quick_diagnosis_traces_each_step(tmp_path, fashion_mnist):
    doc = zo_diagnose.run_diagnose(tmp_path, tmp_path / "results", quick=True, log=lambda s: None,
                                   docs=tmp_path)
    rows = json.loads((tmp_path / "results" / "zo-diagnose.quick.json").read_text())["rows"]
    assert [r["max_step"] for r in rows] == list(zo_diagnose.LIMITS)
    assert doc["rows"] == rows
    for r in rows:
        assert r["steps"] and 0 <= r["test_accuracy"] <= 1
        for s in r["steps"]:
            assert 0 <= s["fc1_saturated"] <= 1 and s["loss"] > 0
            for layer in ("conv2", "fc1"):
                assert -1 <= s[layer]["cosine"] <= 1 and 0 < s[layer]["gamma"] <= 1
                if r["max_step"]:
                    assert s[layer]["largest_step"] <= r["max_step"]
