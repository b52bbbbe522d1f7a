"""A user's own `.npz` file as a dataset: what it becomes, and every fault refused with its message."""

from __future__ import annotations

import io as _io
import zipfile

import numpy as np
import pytest

from mcutrain import limits
from mcutrain.data import DatasetError, load_dataset
from mcutrain.data.npz_file import TEST_FRACTION, is_npz_path
from mcutrain.data.subset import subset


def _digits() -> tuple[np.ndarray, np.ndarray]:
    """All 1797 digits as uint8 pixels 0..255 (N, 8, 8, 1) and their labels."""
    ds = load_dataset("digits")
    x = np.concatenate([ds.x_train, ds.x_test])
    return np.round(x * 255).astype(np.uint8), np.concatenate([ds.y_train, ds.y_test])


def _small(n: int = 40, classes: int = 4, shape: tuple[int, ...] = (8, 8, 1)):
    rng = np.random.default_rng(1)
    return rng.random((n, *shape), dtype=np.float32), np.arange(n) % classes


def _npy(arr: np.ndarray) -> bytes:
    """`arr` as a .npy member; an object array gets its real `|O` header over zero bytes (never a
    pickle: the loader must refuse it from the header alone)."""
    buf = _io.BytesIO()
    if arr.dtype.hasobject:
        np.lib.format.write_array_header_1_0(buf, {"descr": "|O", "fortran_order": False, "shape": arr.shape})
        buf.write(bytes(8 * arr.size))
    else:
        np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _zip(path, members: dict[str, bytes]) -> str:
    with zipfile.ZipFile(path, "w") as z:
        for name, blob in members.items():
            z.writestr(name + ".npy", blob)
    return str(path)


def _save(tmp_path, name: str = "mine.npz", **arrays) -> str:
    path = tmp_path / name
    np.savez(path, **arrays)
    return str(path)


# ---------------------------------------------------------------- what the file becomes


def test_uint8_pixels_are_scaled_to_0_1_and_split_20_percent_per_class(tmp_path):
    x, y = _digits()
    ds = load_dataset(_save(tmp_path, x=x, y=y))
    assert ds.x_train.dtype == np.float32 and ds.value_range == (0.0, 1.0)
    assert ds.x_train.max() == 1.0 and ds.x_train.min() == 0.0
    counts = np.bincount(y)
    assert np.array_equal(np.bincount(ds.y_test), np.round(counts * TEST_FRACTION).astype(np.int64))
    assert ds.n_train + ds.n_test == len(y) and ds.num_classes == 10 and not ds.classes_known
    # every sample is one of the file's, scaled by 1/255 exactly as float32 arithmetic gives it
    want = np.sort((x.astype(np.float32) * np.float32(1 / 255)).reshape(len(x), -1), axis=0)
    got = np.sort(np.concatenate([ds.x_train, ds.x_test]).reshape(len(x), -1), axis=0)
    assert np.array_equal(got, want)


def test_the_split_is_fixed_whatever_the_seed(tmp_path):
    x, y = _digits()
    path = _save(tmp_path, x=x, y=y)
    a, b = load_dataset(path, seed=0), load_dataset(path, seed=7)
    assert np.array_equal(a.x_test, b.x_test) and np.array_equal(a.y_train, b.y_train)


def test_floats_and_other_integers_are_kept_as_their_values(tmp_path):
    x, y = _small()
    ds = load_dataset(_save(tmp_path, x=x.astype(np.float64) * 10 - 5, y=y, x_test=x[:8], y_test=y[:8]))
    assert np.array_equal(ds.x_train, (x.astype(np.float64) * 10 - 5).astype(np.float32))
    assert ds.value_range == (float(ds.x_train.min()), float(ds.x_train.max()))
    ints = (x * 1000).astype(np.int16)
    ds = load_dataset(_save(tmp_path, "i.npz", x=ints, y=y, x_test=ints[:8], y_test=y[:8]))
    assert np.array_equal(ds.x_test, ints[:8].astype(np.float32))


def test_features_become_a_one_row_signal_and_test_arrays_are_used_as_given(tmp_path):
    x, y = _small(shape=(40,))
    ds = load_dataset(_save(tmp_path, x=x, y=y.astype(np.uint8), x_test=x[:6], y_test=y[:6]))
    assert ds.shape == (1, 40, 1) and ds.n_train == 40 and ds.n_test == 6
    assert np.array_equal(ds.x_test[:, 0, :, 0], x[:6]) and ds.y_test.dtype == np.int64


def test_a_path_that_looks_like_a_spec_is_a_file_when_it_ends_in_npz(tmp_path):
    x, y = _small()
    path = _save(tmp_path, "fashion-mnist-c:fog:3[0-4].npz", x=x, y=y)
    assert is_npz_path(path) and is_npz_path("A.NPZ") and not is_npz_path("digits[0-4]")
    ds = load_dataset(path)
    assert ds.name == path and ds.corruption is None and ds.num_classes == 4


def test_subsets_of_a_file_keep_that_its_labels_alone_tell_the_classes(tmp_path):
    x, y = _digits()
    ds = subset(load_dataset(_save(tmp_path, x=x, y=y)), 50, 20, seed=0)
    assert ds.n_train == 50 and ds.n_test == 20 and not ds.classes_known


# ---------------------------------------------------------------- faults, each with its message


X, Y = _small()


CASES = {
    "missing file": (lambda t: str(t / "nope.npz"), "dataset file '.*nope.npz' does not exist"),
    "a folder": (lambda t: (t / "dir.npz").mkdir() or str(t / "dir.npz"), "is not a file"),
    "not a zip": (lambda t: (t / "t.npz").write_text("x,y\n1,2\n") and str(t / "t.npz"), "not a zip archive"),
    "object array": (lambda t: _zip(t / "o.npz", {"x": _npy(np.array([{"a": 1}] * 4, dtype=object)),
                                                   "y": _npy(np.arange(4))}), "pickle"),
    "no x": (lambda t: _save(t, images=X, y=Y), "no array 'x' .*images"),
    "no y": (lambda t: _save(t, x=X), "no array 'y'"),
    "x_test alone": (lambda t: _save(t, x=X, y=Y, x_test=X), "has 'x_test' but no 'y_test'"),
    "grey images without a channel": (lambda t: _save(t, x=X[..., 0], y=Y),
                                      r"shape \(40, 8, 8\).*x\[\.\.\., None\]"),
    "one-dimensional x": (lambda t: _save(t, x=np.zeros(5), y=np.arange(5)),
                          "N x H x W x C .* or N x features"),
    "column labels": (lambda t: _save(t, x=X, y=Y[:, None]), r"shape \(N,\) \(y\.ravel\(\)\)"),
    "count mismatch": (lambda t: _save(t, x=X, y=Y[:39]), "'x' holds 40 samples but 'y' 39"),
    "no samples": (lambda t: _save(t, x=np.zeros((0, 4)), y=np.zeros(0, np.int64)), "'x' holds no samples"),
    "float labels": (lambda t: _save(t, x=X, y=Y.astype(np.float32)),
                     r"type float32; labels are integer.*y\.astype\(np\.int64\)"),
    "negative label": (lambda t: _save(t, x=X, y=Y - 1), "negative label -1"),
    "label too large": (lambda t: _save(t, x=X, y=Y * 30000),
                        f"label 90000; labels are class numbers below {limits.MAX_CLASSES:,}"),
    "NaN": (lambda t: _save(t, x=np.where(np.arange(40)[:, None, None, None] == 3, np.nan, X), y=Y),
            r"NaN, infinite .* in 1 samples \(the first is sample 3\)"),
    "beyond float32": (lambda t: _save(t, x=np.full((40, 2), 1e300), y=Y), "beyond-float32"),
    "one class": (lambda t: _save(t, x=X, y=np.full(40, 3)), "only class 3; .*at least two"),
    "test shape": (lambda t: _save(t, x=X, y=Y, x_test=np.zeros((4, 4, 4, 1)), y_test=np.arange(4)),
                   r"x_test has samples of shape \(4, 4, 1\) but x \(8, 8, 1\)"),
    "too few to split": (lambda t: _save(t, x=np.zeros((3, 4)), y=np.arange(3)),
                         "too few to hold out a test split"),
    "structured": (lambda t: _zip(t / "s.npz", {"x": _npy(np.zeros(4, [("a", "<f4"), ("b", "<i4")])),
                                                 "y": _npy(np.arange(4))}), "plain integer or float"),
    "not ending in .npz": (lambda t: (t / "data.csv").write_text("1") and str(t / "data.csv"),
                           "is a file, but dataset files must end in .npz"),
}


@pytest.mark.parametrize("case", CASES)
def test_faults_are_refused_with_what_is_wrong_and_what_to_do(case, tmp_path):
    make, message = CASES[case]
    with pytest.raises(DatasetError, match=message):
        load_dataset(make(tmp_path))


# ---------------------------------------------------------------- hostile files


def _header(shape: tuple[int, ...], descr: str = "<f4", pad: int = 0) -> bytes:
    """A .npy header (format 2.0 when `pad` makes it too long for 1.0) declaring `shape`, no data."""
    text = repr({"descr": descr, "fortran_order": False, "shape": shape}) + " " * pad + "\n"
    major = 2 if len(text) + 10 > 0xFFFF else 1
    size = len(text).to_bytes(2 if major == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([major, 0]) + size + text.encode()


def _valid_bytes(tmp_path) -> bytes:
    x, y = _small()
    path = tmp_path / "base.npz"
    np.savez_compressed(path, x=(x * 255).astype(np.uint8), y=y)
    return path.read_bytes()


Y4 = _npy(np.arange(4))
HOSTILE = {
    "huge header": ({"x": _header((4, 2), pad=100_000), "y": Y4}, "array 'x' has a 100,.*-byte header"),
    "10^12 elements claimed": ({"x": _header((10**6, 10**6)), "y": Y4},
                               f"array 'x' claims 1,000,000,000,000 elements, more than the limit "
                               f"{limits.MAX_DATASET_ELEMENTS:,}"),
    "data shorter than the header says": ({"x": _header((4, 2)) + bytes(8), "y": Y4},
                                          "array 'x': the entry holds .* bytes, its header declares"),
    "object dtype": ({"x": _npy(np.zeros((4, 2))), "y": _npy(np.array(list("abcd"), dtype=object))},
                     "array 'y' holds Python objects that need pickle"),
    "bad magic": ({"x": b"NOTNUMPY" * 4, "y": Y4}, r"array 'x' is not a \.npy array"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_members_are_refused_from_their_headers(case, tmp_path):
    members, message = HOSTILE[case]
    with pytest.raises(DatasetError, match=message):
        load_dataset(_zip(tmp_path / "h.npz", members))


def test_a_huge_member_that_is_not_x_or_y_is_never_read(tmp_path):
    x, y = _small()
    with zipfile.ZipFile(tmp_path / "big.npz", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("x.npy", _npy(x))
        z.writestr("y.npy", _npy(y))
        with z.open("junk.npy", "w", force_zip64=True) as f:   # 256 MiB of zeros, ~256 KB compressed
            chunk = bytes(1 << 20)
            for _ in range(256):
                f.write(chunk)
    ds = load_dataset(str(tmp_path / "big.npz"))
    assert ds.n_train + ds.n_test == 40 and ds.num_classes == 4


def test_truncated_and_bit_flipped_files_load_or_are_refused_never_crash(tmp_path):
    data = _valid_bytes(tmp_path)
    rng = np.random.default_rng(20240601)
    truncated = [data[:n] for n in (4, 30, len(data) // 3, len(data) // 2, len(data) - 22, len(data) - 1)]
    flipped = []
    for _ in range(40):
        b = bytearray(data)
        for i in rng.integers(0, len(b), 3):
            b[i] ^= 1 << int(rng.integers(0, 8))
        flipped.append(bytes(b))
    for i, blob in enumerate(truncated + flipped):
        path = tmp_path / f"m{i}.npz"
        path.write_bytes(blob)
        try:
            load_dataset(str(path))
        except DatasetError as e:
            assert str(path) in str(e)
        else:
            assert i >= len(truncated), f"a file cut to {len(blob)} of {len(data)} bytes loaded"
