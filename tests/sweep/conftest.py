"""Fixtures of the sweep tests: small sweep files on the bundled digits, written to a temp folder."""

from __future__ import annotations

from pathlib import Path

import pytest

SMALL = """
[sweep]
name = "small"

[base]
arch = "digits-cnn"
dataset = "digits"
epochs = 1
train_samples = 200
test_samples = 100

[grid]
method = [{ method = "fqt" }, { method = "zo", queries = 4 }]
lr = [0.01, 0.05]
seed = [0, 1]
"""
"""8 cells of about a second each: the worker-count and resume tests' sweep."""


@pytest.fixture
def small_sweep(tmp_path: Path) -> Path:
    path = tmp_path / "small.toml"
    path.write_text(SMALL)
    return path
