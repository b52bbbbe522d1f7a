"""The benchmark runner (`mcutrain.bench.runner`): registry and discovery, result files, docs
blocks; the quick FQT benchmarks run end to end."""

from __future__ import annotations

import json

import pytest

from mcutrain import bench
from mcutrain.cli import main


def test_registry_has_fqt_benchmarks():
    names = bench.benchmarks()
    assert {"fqt-scratch", "fqt-transfer", "fqt-partial", "sim-speed"} <= set(names)


EVERY = {"float-speed", "fqt-partial", "fqt-scratch", "fqt-scratch-10ep", "fqt-transfer", "fqt-update",
         "int8-core", "lr-defaults", "mcu", "mcu-inference", "mcu-partial", "mcu-rounding", "memory",
         "sim-speed", "tflm", "zo-ablation", "zo-adapt", "zo-cost", "zo-diagnose", "update-share"}


def test_list_names_every_benchmark_of_the_package(capsys):
    """Every module of `mcutrain.bench` is discovered, the two folded-in scripts included; each has
    a one-line description (its function's docstring)."""
    assert main(["bench", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = {line.split()[0]: line.split(maxsplit=1)[1:] for line in lines}
    assert set(listed) == EVERY and all(listed.values())


def test_write_results_and_docs_blocks(tmp_path):
    p = bench.write_results(tmp_path, "demo", [{"a": 1}], complete=True)
    assert json.loads(p.read_text()) == {"benchmark": "demo", "rows": [{"a": 1}], "complete": True}
    assert bench.write_results(tmp_path, "demo", [], quick=True).name == "demo.quick.json"
    bench.update_docs(tmp_path, "one", "| x |\n|---|\n| 1 |")
    bench.update_docs(tmp_path, "two", "table two")
    bench.update_docs(tmp_path, "one", "new one")
    text = (tmp_path / "benchmarks.md").read_text()
    assert text.count("<!-- bench:one -->") == 1 and "new one" in text and "| 1 |" not in text
    assert text.index("new one") < text.index("table two")


def test_markdown_table_formats():
    t = bench.markdown_table([{"a": 0.12345, "b": None}], ["a", "b"], {"a": ".2f"})
    assert t.splitlines()[-1] == "| 0.12 | — |"


def test_unknown_benchmark(capsys):
    assert main(["bench", "nope"]) == 1
    assert "fqt-scratch" in capsys.readouterr().err


@pytest.mark.parametrize("name", [
    "fqt-scratch", "fqt-partial", pytest.param("sim-speed", marks=pytest.mark.slow), "fqt-transfer"])
def test_quick_benchmarks(name, tmp_path, capsys):
    if name == "sim-speed":
        pytest.importorskip("torch")
    assert main(["bench", name, "--quick", "--work", str(tmp_path / "w"), "--results", str(tmp_path / "r"),
                 "--docs", str(tmp_path / "d"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["benchmark"] == name and doc["complete"] is True and doc["rows"]
    assert not (tmp_path / "d").exists()           # quick runs never touch the docs
    row = doc["rows"][0]
    if name == "fqt-scratch":
        assert {r["precision"] for r in doc["rows"]} == {"uint8", "mixed", "float32", "int8"}
        assert set(row) == {"dataset", "arch", "precision", "update", "accuracy", "accuracy_std", "seeds",
                            "epochs", "lr"}
        assert row["lr"] == 0.01                    # the quick budget's digits rate
    if name == "fqt-partial":
        assert doc["rows"][0]["backward_macs_ratio"] == 1.0
        assert all(r["backward_macs_ratio"] > 1.5 for r in doc["rows"] if r["lambda_min"] == 0.1)
    if name == "sim-speed":
        assert set(row) == {"method", "precision", "arch", "batch", "trainable", "workers", "clock",
                            "samples_per_s", "torch_float_samples_per_s", "ratio", "ratio_min", "ratio_max",
                            "rounds", "steps"}
        assert {(r["method"], r["workers"]) for r in doc["rows"]} >= {("fqt", 1), ("zo", 1), ("zo", 2)}
        assert all(r["ratio_min"] <= r["ratio"] <= r["ratio_max"] for r in doc["rows"])
