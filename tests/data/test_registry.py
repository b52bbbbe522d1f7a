"""Loading datasets: search order, caching, subsets, corruptions, missing-data messages."""

import os
import random

import numpy as np
import pytest

from mcutrain.data import DatasetError, dataset_status, load_dataset
from mcutrain.data import registry as R
from mcutrain.data.cache import cache_dir
from mcutrain.data.idx import write_idx


def fake_idx(directory, n_train=30, n_test=20, seed=0):
    """Write the four IDX files of a tiny 28x28 dataset with labels 0..9."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = [rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
              np.arange(n_train, dtype=np.uint8) % 10,
              rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
              np.arange(n_test, dtype=np.uint8) % 10]
    for part, a in zip(R.IDX_PARTS, arrays):
        write_idx(directory / f"{part}.gz", a)
    return arrays


@pytest.fixture
def no_system_dirs(monkeypatch, tmp_path):
    monkeypatch.setattr(R, "SYSTEM_DIRS", [tmp_path / "system"])
    return tmp_path / "system"


def test_idx_dataset_from_mcutrain_data_then_cache(isolated_dirs, no_system_dirs, monkeypatch):
    arrays = fake_idx(isolated_dirs / "data" / "mnist")
    ds = load_dataset("mnist")
    assert ds.source == str(isolated_dirs / "data" / "mnist")
    assert ds.x_train.shape == (30, 28, 28, 1) and ds.x_train.dtype == np.float32
    np.testing.assert_allclose(ds.x_train[..., 0] * 255, arrays[0], atol=1e-4)
    assert ds.y_test.dtype == np.int64 and ds.y_test.tolist() == arrays[3].tolist()
    assert list((cache_dir() / "mnist").glob("arrays-*.npz"))
    # the second load comes from the cache: IDX decoding is not called again
    monkeypatch.setattr(R, "read_idx", lambda p: pytest.fail("decoded again despite the cache"))
    again = load_dataset("mnist")
    assert np.array_equal(again.x_train, ds.x_train)


def test_cache_follows_source_changes(isolated_dirs, no_system_dirs):
    d = isolated_dirs / "data" / "mnist"
    fake_idx(d, seed=0)
    first = load_dataset("mnist").x_train
    fake_idx(d, seed=1)
    for f in d.iterdir():                      # make sure the mtime moves even on coarse clocks
        os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    assert not np.array_equal(load_dataset("mnist").x_train, first)
    assert len(list((cache_dir() / "mnist").glob("arrays-*.npz"))) == 1   # stale entry removed


def test_search_order_and_system_dir(isolated_dirs, no_system_dirs):
    fake_idx(no_system_dirs / "mnist", n_train=12)
    assert load_dataset("mnist").n_train == 12                      # found in the system dir
    fake_idx(cache_dir() / "mnist", n_train=14)
    assert load_dataset("mnist").n_train == 14                      # the cache dir comes first
    fake_idx(isolated_dirs / "data" / "mnist", n_train=16)
    assert dataset_status("mnist")["n_train"] == 16                 # $MCUTRAIN_DATA comes first of all


def test_missing_dataset_message(no_system_dirs):
    with pytest.raises(DatasetError) as e:
        load_dataset("fashion-mnist")
    msg = str(e.value)
    assert "Looked in" in msg and str(no_system_dirs / "fashion-mnist") in msg
    assert "apt-get install dataset-fashion-mnist" in msg
    assert "$MCUTRAIN_DATA/fashion-mnist/" in msg and "train-images-idx3-ubyte.gz" in msg
    assert dataset_status("fashion-mnist") == {"name": "fashion-mnist", "available": False, "source": None,
                                               "n_train": None, "n_test": None, "shape": [28, 28, 1]}


def test_unknown_dataset():
    with pytest.raises(DatasetError, match="known: digits, mnist1d"):
        load_dataset("cifar10")


def test_digits_fixed_split_and_range():
    a, b = load_dataset("digits", seed=0), load_dataset("digits", seed=7)
    assert a.x_train.shape == (1438, 8, 8, 1) and a.x_test.shape == (359, 8, 8, 1)
    assert np.array_equal(a.x_test, b.x_test) and np.array_equal(a.y_test, b.y_test)
    assert a.x_train.min() == 0.0 and a.x_train.max() == 1.0
    assert np.bincount(a.y_test).min() >= 35 and a.num_classes == 10 and a.source.startswith("scikit-learn")


def test_class_subset_remaps_labels_and_records_classes():
    full, sub = load_dataset("digits"), load_dataset("digits[2,5,7]")
    assert sub.classes == (2, 5, 7) and sub.num_classes == 3 and sub.class_names == ("2", "5", "7")
    assert sorted(np.unique(sub.y_train)) == [0, 1, 2]
    keep = np.isin(full.y_test, [2, 5, 7])
    assert np.array_equal(sub.x_test, full.x_test[keep])
    assert np.array_equal(np.array(sub.classes)[sub.y_test], full.y_test[keep])
    with pytest.raises(DatasetError, match=r"classes 0\.\.9"):
        load_dataset("digits[8-12]")


def test_corrupted_spec_is_lazy_deterministic_and_separates_train_and_test():
    ds = load_dataset("digits-c:gaussian_noise:4", seed=1)
    assert ds.name == "digits-c:gaussian_noise:4" and "x_train" not in vars(ds)
    clean = load_dataset("digits")
    assert not np.array_equal(ds.x_test, clean.x_test)
    assert "x_train" not in vars(ds)                           # the train set is corrupted only on use
    assert np.array_equal(ds.x_test, load_dataset("digits-c:gaussian_noise:4", seed=1).x_test)
    assert not np.array_equal(ds.x_test, load_dataset("digits-c:gaussian_noise:4", seed=2).x_test)
    assert ds.x_train.shape == clean.x_train.shape and ds.x_train.max() <= 1.0


def test_mnist1d_generated_cached_and_global_rng_untouched():
    # mnist1d's generator reseeds the legacy global generators; the loader must restore them
    before_np, before_py = np.random.get_state()[1].copy(), random.getstate()  # noqa: NPY002
    ds = load_dataset("mnist1d")
    assert np.array_equal(np.random.get_state()[1], before_np) and random.getstate() == before_py  # noqa: NPY002
    assert ds.x_train.shape == (4000, 1, 40, 1) and ds.x_test.shape == (1000, 1, 40, 1)
    assert ds.x_train.dtype == np.float32 and sorted(np.unique(ds.y_train)) == list(range(10))
    assert ds.value_range[0] < -1 and ds.value_range[1] > 1                   # standardized signals
    assert abs(float(np.concatenate([ds.x_train, ds.x_test]).std()) - 1) < 0.01
    assert np.array_equal(load_dataset("mnist1d").x_test, ds.x_test)          # from the cache now
    with pytest.raises(DatasetError, match="1-D signals"):
        load_dataset("mnist1d-c:fog:1")


@pytest.mark.skipif(R._idx_files(R.SYSTEM_DIRS[0] / "fashion-mnist") is None,
                    reason="Fashion-MNIST not installed: apt-get install dataset-fashion-mnist")
def test_real_fashion_mnist():
    ds = load_dataset("fashion-mnist[0-4]")
    assert ds.n_train == 30000 and ds.n_test == 5000 and ds.shape == (28, 28, 1)
    assert ds.class_names[0] == "T-shirt/top"
    row = dataset_status("fashion-mnist")
    assert (row["available"], row["n_train"], row["n_test"]) == (True, 60000, 10000)
