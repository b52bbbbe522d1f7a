"""Splits fixed by a seed: the ZO seed's adaptation protocol and plain stratified splits.

Both draw one random permutation and rank every sample within its class along
it (a stable sort by label), so membership is decided for all samples at once,
and each part comes out in random order.
"""

from __future__ import annotations

import numpy as np


class SplitError(ValueError):
    """A split that cannot be made; the message names the class and the counts."""


def _rank_in_class(y: np.ndarray, perm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For samples visited in `perm` order: their rank within their class, the classes, counts."""
    yp = y[perm]
    order = np.argsort(yp, kind="stable")
    classes, starts, counts = np.unique(yp[order], return_index=True, return_counts=True)
    rank = np.empty(len(yp), np.int64)
    rank[order] = np.arange(len(yp)) - np.repeat(starts, counts)
    return rank, classes, counts


def _check(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or len(x) != len(y):
        raise SplitError(f"x has {len(x)} samples but y has shape {y.shape}; pass one label per sample")
    return y


def adaptation_split(x: np.ndarray, y: np.ndarray, n_train: int = 100, n_val: int = 10, seed: int = 0,
                     n_test: int | None = None):
    """Per class: `n_train` training, `n_val` validation and the rest (or `n_test`) test samples.

    This is the protocol of the ZO seed (Zhao et al., "Poor Man's Training on MCUs",
    arXiv:2411.05873, released configs): 100 train and 10 validation images per class
    of the corrupted set; their runs took 90 test images per class (`n_test=90`).
    Returns (x_tr, y_tr, x_val, y_val, x_te, y_te).
    """
    y = _check(x, y)
    if min(n_train, n_val) < 0 or (n_test is not None and n_test < 0):
        raise SplitError("n_train, n_val and n_test must not be negative")
    perm = np.random.default_rng(seed).permutation(len(y))
    rank, classes, counts = _rank_in_class(y, perm)
    need = n_train + n_val + (1 if n_test is None else n_test)
    short = counts < need
    if short.any():
        c = int(np.argmax(short))
        raise SplitError(f"class {classes[c]} has {counts[c]} samples, fewer than the {need} the split "
                         f"needs (train {n_train} + val {n_val} + test {1 if n_test is None else n_test}); "
                         "lower n_train/n_val or use more data")
    test_end = np.inf if n_test is None else n_train + n_val + n_test
    parts = [perm[rank < n_train], perm[(rank >= n_train) & (rank < n_train + n_val)],
             perm[(rank >= n_train + n_val) & (rank < test_end)]]
    return tuple(a for idx in parts for a in (x[idx], y[idx]))


def stratified_split(x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int = 0):
    """Hold out round(count * test_fraction) samples of every class (at least one of each side
    for a class with two or more samples). Returns (x_tr, y_tr, x_te, y_te)."""
    y = _check(x, y)
    if not 0.0 < test_fraction < 1.0:
        raise SplitError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction}")
    perm = np.random.default_rng(seed).permutation(len(y))
    rank, classes, counts = _rank_in_class(y, perm)
    n_test = np.round(counts * test_fraction).astype(np.int64)
    n_test = np.where(counts >= 2, np.clip(n_test, 1, counts - 1), n_test)
    per_sample = n_test[np.searchsorted(classes, y[perm])]
    test = rank < per_sample
    return x[perm[~test]], y[perm[~test]], x[perm[test]], y[perm[test]]
