"""Seeded, class-balanced subsets of a dataset's splits (`--train-samples`, `--test-samples`).

A subset is drawn round-robin over the classes: one random sample of every class, then a
second of every class, and so on, so class counts differ by at most one (a class that runs
out leaves its turns to the others). The subset of N samples is the first N of one seeded
order, so a smaller subset is always part of a larger one with the same seed, and the chosen
samples keep the split's original order.

Example:
    >>> y = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2, 2])
    >>> np.bincount(y[balanced_indices(y, 6, seed=0)]).tolist()
    [2, 2, 2]
"""

from __future__ import annotations

import numpy as np

from mcutrain.data.dataset import Dataset
from mcutrain.data.splits import SplitError, _rank_in_class


def balanced_indices(y: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """Sorted indices of `n` samples of labels `y`, as balanced over the classes as they allow."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise SplitError(f"labels must be one-dimensional, got shape {y.shape}")
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 1 <= n <= len(y):
        raise SplitError(f"a subset needs between 1 and {len(y)} samples (all there are), got {n!r}")
    perm = np.random.default_rng([seed, 11]).permutation(len(y))
    rank, _, _ = _rank_in_class(y, perm)
    # NOTE: a stable sort by rank interleaves the classes: rank 0 of every class (in `perm`
    # order), then rank 1, ...; any prefix of it is balanced to within one sample per class.
    turns = np.argsort(rank, kind="stable")
    return np.sort(perm[turns[:n]])


def subset(ds: Dataset, train: int | None = None, test: int | None = None, seed: int = 0) -> Dataset:
    """`ds` with `train` training and `test` test samples (None keeps a split whole).

    The clean images are chosen first and corrupted afterwards, so a corrupted dataset pays
    only for the samples it keeps; the corruption draws of a subset are its own (the same
    corruption at the same severity, not the same noise as the full split's same images).
    """
    def pick(y: np.ndarray, n: int | None, what: str) -> np.ndarray | slice:
        if n is None or n == len(y):
            return slice(None)
        try:
            return balanced_indices(y, n, seed)
        except SplitError:
            raise SplitError(f"'{ds.name}' has {len(y)} {what} samples; ask for 1 to {len(y)}, "
                             f"not {n}") from None

    tr, te = pick(ds.y_train, train, "training"), pick(ds.y_test, test, "test")
    if isinstance(tr, slice) and isinstance(te, slice):
        return ds
    return Dataset(ds.name, ds.clean_train[tr], ds.y_train[tr], ds.clean_test[te], ds.y_test[te],
                   classes=ds.classes, source=ds.source, class_names=ds.class_names,
                   value_range=ds.value_range, corruption=ds.corruption, severity=ds.severity, seed=ds.seed,
                   classes_known=ds.classes_known, preprocessing=ds.preprocessing)
