"""Class-balanced subsets: counts, nesting, order, corruption of the kept samples only, errors."""

import numpy as np
import pytest

from mcutrain.data import Dataset, SplitError, corrupt
from mcutrain.data.subset import balanced_indices, subset


def test_counts_are_balanced_to_within_one_and_short_classes_give_way():
    y = np.repeat(np.arange(4), [50, 3, 50, 50])
    idx = balanced_indices(y, 31, seed=0)
    assert np.bincount(y[idx], minlength=4).tolist() in ([10, 3, 9, 9], [9, 3, 10, 9], [9, 3, 9, 10])
    assert np.bincount(y[balanced_indices(y, 8, seed=0)], minlength=4).tolist() == [2, 2, 2, 2]
    assert len(set(idx.tolist())) == 31 and np.all(np.diff(idx) > 0)     # distinct, in the split's order


def test_a_smaller_subset_is_part_of_a_larger_one_and_the_seed_decides():
    y = np.random.default_rng(1).integers(0, 10, 500)
    small, large = balanced_indices(y, 40, seed=3), balanced_indices(y, 120, seed=3)
    assert set(small.tolist()) <= set(large.tolist())
    assert np.array_equal(balanced_indices(y, 40, seed=3), small)
    assert not np.array_equal(balanced_indices(y, 40, seed=4), small)
    assert np.array_equal(balanced_indices(y, 500, seed=3), np.arange(500))


@pytest.mark.parametrize("n", [0, 11, -1, True])
def test_bad_sizes_say_what_is_allowed(n):
    with pytest.raises(SplitError, match="between 1 and 10"):
        balanced_indices(np.arange(10) % 2, n)


def test_dataset_subset_keeps_labels_classes_and_corrupts_only_what_it_keeps():
    rng = np.random.default_rng(0)
    x_tr, x_te = rng.random((60, 8, 8, 1), np.float32), rng.random((30, 8, 8, 1), np.float32)
    y_tr, y_te = np.arange(60) % 3, np.arange(30) % 3
    ds = Dataset("toy-c:stripe:5", x_tr, y_tr, x_te, y_te, classes=(0, 1, 2), corruption="stripe", severity=5,
                 seed=2)
    sub = subset(ds, train=12, test=9, seed=0)
    assert (sub.n_train, sub.n_test, sub.classes, sub.name) == (12, 9, (0, 1, 2), "toy-c:stripe:5")
    assert np.bincount(sub.y_train).tolist() == [4, 4, 4] and np.bincount(sub.y_test).tolist() == [3, 3, 3]
    idx = balanced_indices(y_tr, 12, seed=0)
    assert np.array_equal(sub.clean_train, x_tr[idx]) and np.array_equal(sub.y_train, y_tr[idx])
    assert np.array_equal(sub.x_train, corrupt(x_tr[idx], "stripe", 5, seed=2, stream=0))
    assert subset(ds) is ds and subset(ds, train=60, test=30) is ds
    only_train = subset(ds, train=6)
    assert only_train.n_test == 30 and np.array_equal(only_train.clean_test, x_te)
    with pytest.raises(SplitError, match="has 30 test samples; ask for 1 to 30, not 31"):
        subset(ds, test=31)
