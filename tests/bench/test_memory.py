"""Benchmark `memory` (`mcutrain.bench.memory`): the quick run plans the four settings, RAM adds up."""

from __future__ import annotations

import json

from mcutrain import bench


def test_memory_benchmark_quick(tmp_path):
    bench.run("memory", quick=True, work=tmp_path / "w", results=tmp_path / "r", docs=tmp_path / "d",
              log=lambda *_: None)
    doc = json.loads((tmp_path / "r" / "memory.quick.json").read_text())
    assert doc["complete"] and len(doc["rows"]) == 4
    row = doc["rows"][0]
    assert row["setting"] == "fqt uint8, last 2 blocks" and row["fits"]
    assert row["ram_kb"] == row["arena_kb"] + row["weights_ram_kb"] + row["state_kb"] + row["stack_kb"]
    assert not (tmp_path / "d").exists()
