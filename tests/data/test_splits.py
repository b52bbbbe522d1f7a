"""Seeded splits: per-class counts, disjointness, determinism, and refusals."""

import numpy as np
import pytest

from mcutrain.data import SplitError, adaptation_split, stratified_split


def make(n_per_class=(150, 130, 120)):
    y = np.repeat(np.arange(len(n_per_class)), n_per_class)
    x = np.arange(len(y), dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)   # x[i, 0] = i
    return x, y


def test_adaptation_split_counts_and_cover():
    x, y = make()
    x_tr, y_tr, x_va, y_va, x_te, y_te = adaptation_split(x, y, 100, 10, seed=0)
    assert np.bincount(y_tr).tolist() == [100, 100, 100]
    assert np.bincount(y_va).tolist() == [10, 10, 10]
    assert np.bincount(y_te).tolist() == [40, 20, 10]
    ids = np.concatenate([x_tr[:, 0], x_va[:, 0], x_te[:, 0]]).astype(int)
    assert sorted(ids) == list(range(len(y)))                  # disjoint, and all used
    assert np.array_equal(y[x_tr[:, 0].astype(int)], y_tr)      # labels travel with samples


def test_adaptation_split_is_fixed_by_seed_and_shuffled():
    x, y = make()
    a = adaptation_split(x, y, 100, 10, seed=1)
    b = adaptation_split(x, y, 100, 10, seed=1)
    c = adaptation_split(x, y, 100, 10, seed=2)
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    assert len(np.unique(a[1][:20])) > 1                         # not grouped by class


def test_adaptation_split_with_fixed_test_count():
    x, y = make()
    *_, y_te = adaptation_split(x, y, 100, 10, seed=0, n_test=5)
    assert np.bincount(y_te).tolist() == [5, 5, 5]


def test_adaptation_split_refuses_small_classes():
    x, y = make((150, 60))
    with pytest.raises(SplitError, match="class 1 has 60 samples"):
        adaptation_split(x, y, 100, 10)
    with pytest.raises(SplitError, match="one label per sample"):
        adaptation_split(x, y[:-1])


def test_stratified_split():
    x, y = make((100, 50, 11))
    x_tr, y_tr, x_te, y_te = stratified_split(x, y, 0.2, seed=0)
    assert np.bincount(y_te).tolist() == [20, 10, 2]
    assert np.bincount(y_tr).tolist() == [80, 40, 9]
    assert sorted(np.concatenate([x_tr[:, 0], x_te[:, 0]]).astype(int)) == list(range(len(y)))
    again = stratified_split(x, y, 0.2, seed=0)
    assert np.array_equal(again[2], x_te)
    with pytest.raises(SplitError, match="strictly between"):
        stratified_split(x, y, 1.0)
