"""`csv:` and `npy:` time series: windows, labels, the time split, per-channel normalization, refusals."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from mcutrain.data import DatasetError, load_dataset
from mcutrain.data.timeseries import time_split, windows


def write_csv(path: Path, labels: list[str], channels=("ax", "ay"), extra_rows=()) -> np.ndarray:
    """One row per label; channel k of row t holds 1000 * k + t (so a window tells its rows)."""
    t = np.arange(len(labels))
    values = np.stack([1000 * k + t for k in range(len(channels))], axis=1).astype(float)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*channels, "activity"])
        w.writerows([[*map(str, v), lab] for v, lab in zip(values, labels)])
        w.writerows(extra_rows)
    return values


def _rows(x: np.ndarray) -> np.ndarray:
    """The source row index of every time step of (n, 1, window, C) windows (channel 0 = row)."""
    return np.rint(x[:, 0, :, 0]).astype(np.int64)


def test_windows_hold_their_rows_and_a_window_across_two_labels_is_dropped():
    labels = np.array([0] * 10 + [1] * 10)
    x, y, starts = windows(np.arange(20.0)[:, None], labels, 4, 3)
    assert starts.tolist() == [0, 3, 6, 12, 15]            # the window at 9 spans both labels
    assert y.tolist() == [0, 0, 0, 1, 1]
    assert np.array_equal(x[:, :, 0], starts[:, None] + np.arange(4))


def test_time_split_holds_out_the_last_windows_of_each_class_and_drops_overlaps():
    y = np.array([0] * 10 + [1] * 10)
    position = np.arange(20) * 2
    train, test = time_split(y, position, window=4, fraction=0.2)
    assert np.flatnonzero(test).tolist() == [8, 9, 18, 19]
    assert not train[7] and not train[17] and train[6] and train[16]   # 2 rows from a test window


def test_csv_windows_labels_and_split(tmp_path):
    labels = ["walk"] * 100 + ["run"] * 100 + ["sit"] * 100
    write_csv(tmp_path / "imu.csv", labels)
    ds = load_dataset(f"csv:{tmp_path / 'imu.csv'}?window=20&stride=10&label=activity&normalize=none")
    assert ds.class_names == ("run", "sit", "walk") and ds.shape == (1, 20, 2)
    train_rows, test_rows = _rows(ds.x_train), _rows(ds.x_test)
    assert not set(train_rows.ravel()) & set(test_rows.ravel())
    for x, y in ((train_rows, ds.y_train), (test_rows, ds.y_test)):
        assert np.all(np.diff(x, axis=1) == 1)                       # consecutive rows
        assert all(labels[r] == ds.class_names[c] for r, c in zip(x[:, 0], y))
    assert np.array_equal(ds.x_train[..., 1], ds.x_train[..., 0] + 1000)
    assert ds.preprocessing == {"window": 20, "stride": 10, "channels": ["ax", "ay"]}


def test_normalization_is_computed_on_the_training_split_and_stored(tmp_path):
    write_csv(tmp_path / "imu.csv", ["a"] * 60 + ["b"] * 60)
    raw = load_dataset(f"csv:{tmp_path / 'imu.csv'}?window=10&label=activity&normalize=none")
    ds = load_dataset(f"csv:{tmp_path / 'imu.csv'}?window=10&label=activity")
    norm = ds.preprocessing["normalize"]
    mean, std = raw.x_train.mean(axis=(0, 1, 2)), raw.x_train.std(axis=(0, 1, 2))
    assert np.allclose(norm["mean"], mean) and np.allclose(norm["std"], std)
    assert norm["columns"] == ["ax", "ay"]
    assert np.allclose(ds.x_test, (raw.x_test - mean) / std, atol=1e-5)
    assert np.allclose(ds.x_train.mean(axis=(0, 1, 2)), 0, atol=1e-4)


def test_whole_number_labels_sort_as_numbers_and_npy_equals_csv(tmp_path):
    labels = ["10"] * 40 + ["2"] * 40
    values = write_csv(tmp_path / "s.csv", labels)
    table = np.column_stack([values, np.array(labels, dtype=np.int64)])
    np.save(tmp_path / "s.npy", table)
    a = load_dataset(f"csv:{tmp_path / 's.csv'}?window=8&label=activity")
    b = load_dataset(f"npy:{tmp_path / 's.npy'}?window=8")
    assert a.class_names == b.class_names == ("2", "10")
    assert np.array_equal(a.y_train, b.y_train) and np.allclose(a.x_train, b.x_train)


def test_a_folder_of_recordings_has_no_window_across_files(tmp_path):
    (tmp_path / "rec").mkdir()
    write_csv(tmp_path / "rec" / "1.csv", ["a"] * 25 + ["b"] * 25)
    write_csv(tmp_path / "rec" / "2.csv", ["b"] * 25 + ["a"] * 25)
    ds = load_dataset(f"csv:{tmp_path / 'rec'}?window=10&stride=5&label=activity&normalize=none")
    rows = np.concatenate([_rows(ds.x_train), _rows(ds.x_test)])
    assert np.all(np.diff(rows, axis=1) == 1) and rows.max() < 50


OK = "window=10&label=activity"


@pytest.mark.parametrize("extra, query, message", [
    ([["1", "2"]], OK, r"row 302 has 2 cells but the header 3"),
    ([["1", "nan", "walk"]], OK, r"NaN or infinite .*data row 301, column 'ay'"),
    ([["1", "oops", "walk"]], OK, r"data row 301, column 'ay' holds 'oops', not a number"),
    ([], "window=10&label=kind", r"has no column 'kind'"),
    ([], OK + "&columns=ax,gz", r"no column \['gz'\]"),
    ([], "window=400&label=activity", "no window of 400 rows"),
    ([], OK + "&classes=0-5", "classes= needs at least two"),
])
def test_bad_csv_files_are_refused_naming_the_problem(tmp_path, extra, query, message):
    write_csv(tmp_path / "imu.csv", ["walk"] * 150 + ["run"] * 150, extra_rows=extra)
    spec = f"csv:{tmp_path / 'imu.csv'}?{query}"
    with pytest.raises(DatasetError, match=message):
        load_dataset(spec)


def test_one_class_missing_window_and_bad_npy_are_refused(tmp_path):
    write_csv(tmp_path / "one.csv", ["walk"] * 50)
    with pytest.raises(DatasetError, match="holds only the class 'walk'"):
        load_dataset(f"csv:{tmp_path / 'one.csv'}?window=10&label=activity")
    with pytest.raises(DatasetError, match="give the window length"):
        load_dataset(f"csv:{tmp_path / 'one.csv'}?label=activity")
    np.save(tmp_path / "v.npy", np.zeros((4, 4, 4)))
    with pytest.raises(DatasetError, match="a time series is a 2-D number array"):
        load_dataset(f"npy:{tmp_path / 'v.npy'}?window=2")
    np.save(tmp_path / "f.npy", np.column_stack([np.zeros(20), np.full(20, 0.5)]))
    with pytest.raises(DatasetError, match="holds fractions"):
        load_dataset(f"npy:{tmp_path / 'f.npy'}?window=2")
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(f"csv:{tmp_path / 'missing.csv'}?window=2")
