"""Benchmark `float-speed` (`mcutrain.bench.float_speed`, once `benchmarks/float_speed.py`): the quick
run times every side and writes the result keys README.md and other tools read."""

from __future__ import annotations

import json

import pytest

from mcutrain.cli import main

SIDES = ["mcutrain float engine, BLAS 1 thread", "mcutrain float engine, BLAS 2 threads", "pytorch 2 threads",
         "pytorch 1 thread"]


def test_quick_float_speed(tmp_path, capsys):
    pytest.importorskip("torch")
    assert main(["bench", "float-speed", "--quick", "--work", str(tmp_path / "w"), "--results",
                 str(tmp_path / "r"), "--docs", str(tmp_path / "d"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["benchmark", "rows", "step", "macs_per_sample", "mcutrain", "torch", "numpy",
                         "malloc_keeps_freed_memory", "machine", "cpus", "load_average_1min"]
    assert doc["benchmark"] == "float-speed" and [r["engine"] for r in doc["rows"]] == SIDES
    for r in doc["rows"]:
        assert list(r) == ["engine", "arch", "batch", "samples_per_s", "ms_per_step", "cpu_ms_per_step",
                           "speed_vs_pytorch", "speed_vs_pytorch_1_thread", "rounds", "steps_per_round"]
        assert r["samples_per_s"] > 0 and (r["arch"], r["batch"], r["rounds"]) == ("small-cnn", 8, 2)
    assert doc["rows"][2]["speed_vs_pytorch"] == 1.0         # the reference side against itself
    assert (tmp_path / "r" / "float-speed.quick.json").exists() and not (tmp_path / "d").exists()
