"""A Dataset refuses what no method can train on, naming the dataset and the problem."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain.cli import main
from mcutrain.data import Dataset, DatasetError
from mcutrain.data import registry as R
from mcutrain.data.idx import write_idx


def _arrays(n_train: int = 20, n_test: int = 10, classes: int = 3):
    rng = np.random.default_rng(0)
    return (rng.random((n_train, 8, 8, 1), dtype=np.float32), np.arange(n_train) % classes,
            rng.random((n_test, 8, 8, 1), dtype=np.float32), np.arange(n_test) % classes)


def _with(i: int, value):
    a = list(_arrays())
    a[i] = value
    return a


@pytest.mark.parametrize("arrays,message", [
    (_with(1, np.where(np.arange(20) == 3, np.nan, np.arange(20) % 3)), "NaN or infinite"),
    (_with(3, np.arange(10) % 3 - 1), "must be in 0..K-1"),
    (_with(1, np.arange(20) % 3 + 0.5), "whole class numbers"),
    (_with(1, np.array(["a"] * 20)), "must be class numbers"),
    (_with(0, np.full((20, 8, 8, 1), np.inf, np.float32)), "train samples hold NaN or infinite"),
    (_with(2, np.zeros((0, 8, 8, 1), np.float32)), "test split is empty"),
    (_with(2, np.zeros((10, 4, 4, 1), np.float32)), "differ in shape"),
    (_with(1, np.arange(19) % 3), "20 train samples but 19 labels"),
    (_with(0, np.zeros((20, 8, 8), np.float32)), "(N, H, W, C)"),
    (_with(1, np.zeros(20, np.int64)), "only class 0"),
])
def test_unusable_datasets_are_refused(arrays, message):
    with pytest.raises(DatasetError, match="dataset 'mine'") as e:
        Dataset("mine", *arrays)
    assert message in str(e.value)


def test_one_class_and_labels_beyond_the_classes():
    x, _, xt, _ = _arrays()
    with pytest.raises(DatasetError, match="1 class; classification needs at least two"):
        Dataset("mine", x, np.zeros(20, int), xt, np.zeros(10, int))
    with pytest.raises(DatasetError, match="label 5 is out of range for 3 classes"):
        Dataset("mine", x, np.arange(20) % 3, xt, np.full(10, 5), classes=(0, 1, 2))
    assert Dataset("mine", *_arrays()).num_classes == 3


def test_a_user_idx_dataset_with_one_class_is_an_error_line(isolated_dirs, monkeypatch, capsys):
    monkeypatch.setattr(R, "SYSTEM_DIRS", [isolated_dirs / "system"])
    d = isolated_dirs / "data" / "mnist"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (n, 28, 28), dtype=np.uint8) for n in (40, 20)]
    for part, a in zip(R.IDX_PARTS, [images[0], np.zeros(40, np.uint8), images[1], np.zeros(20, np.uint8)]):
        write_idx(d / f"{part}.gz", a)
    code = main(["train", "--arch", "small-cnn", "--init", "random", "--dataset", "mnist", "--epochs", "1"])
    err = capsys.readouterr().err
    assert code == 1
    assert "error: dataset 'mnist': the training split holds only class 0" in err
