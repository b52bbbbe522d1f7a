"""Shared fixtures for the data tests: an isolated cache and data directory, small test images."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

from mcutrain.data import imageops as ops


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch):
    """Every test gets its own cache and $MCUTRAIN_DATA, so no test sees another's files."""
    monkeypatch.setenv("MCUTRAIN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MCUTRAIN_DATA", str(tmp_path / "data"))
    return tmp_path


@pytest.fixture(scope="session")
def digits28():
    """40 real handwritten digits upsampled to 28x28 (MNIST-sized), float32 in [0, 1]."""
    d = load_digits().images[:40].astype(np.float32)[..., None] / 16
    return np.clip(ops.resize(d, ops.linear_matrix(8, 28), ops.linear_matrix(8, 28)), 0, 1)


@pytest.fixture(scope="session")
def rgb28(digits28):
    """The same digits tinted into 3-channel colour images."""
    return np.clip(digits28 * np.array([1.0, 0.6, 0.3], np.float32) + np.array([0, 0.1, 0.2], np.float32),
                   0, 1)
