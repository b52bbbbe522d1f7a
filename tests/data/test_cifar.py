"""`cifar10:` binary batches and `cifar10-c:` per-corruption .npy blocks, on files in their exact format."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mcutrain.data import DatasetError, load_dataset
from mcutrain.data.cifar import CLASS_NAMES, RECORD


def write_batch(path: Path, labels: np.ndarray, seed: int) -> np.ndarray:
    """CIFAR-10 binary records (label byte, 1024 R, 1024 G, 1024 B); returns the images as NHWC."""
    images = np.random.default_rng(seed).integers(0, 256, (len(labels), 32, 32, 3), dtype=np.uint8)
    planes = images.transpose(0, 3, 1, 2).reshape(len(labels), 3072)
    np.concatenate([labels.astype(np.uint8)[:, None], planes], axis=1).tofile(path)
    return images


def write_cifar10(root: Path) -> dict[str, np.ndarray]:
    root.mkdir()
    y1, y2, yt = np.arange(20) % 10, (np.arange(10) * 3) % 10, np.arange(10)[::-1]
    return {"x_train": np.concatenate([write_batch(root / "data_batch_1.bin", y1, 1),
                                       write_batch(root / "data_batch_2.bin", y2, 2)]),
            "y_train": np.concatenate([y1, y2]), "x_test": write_batch(root / "test_batch.bin", yt, 3),
            "y_test": yt}


def test_binary_records_become_nhwc_images_and_labels(tmp_path):
    want = write_cifar10(tmp_path / "c")
    ds = load_dataset(f"cifar10:{tmp_path / 'c'}")
    assert ds.class_names == CLASS_NAMES and ds.shape == (32, 32, 3)
    assert np.array_equal(np.rint(ds.x_train * 255).astype(np.uint8), want["x_train"])
    assert np.array_equal(np.rint(ds.x_test * 255).astype(np.uint8), want["x_test"])
    assert np.array_equal(ds.y_train, want["y_train"]) and np.array_equal(ds.y_test, want["y_test"])


def test_meta_names_subset_and_corruption(tmp_path):
    write_cifar10(tmp_path / "c")
    (tmp_path / "c" / "batches.meta.txt").write_text("\n".join(f"k{i}" for i in range(10)) + "\n\n")
    ds = load_dataset(f"cifar10:{tmp_path / 'c'}?classes=0-1&corruption=fog&severity=2")
    assert ds.class_names == ("k0", "k1") and set(ds.y_train.tolist()) == {0, 1}
    assert ds.corruption == "fog" and ds.severity == 2


@pytest.mark.parametrize("case, message", [
    ("truncated", r"'.*data_batch_1\.bin' holds 6,145 bytes, not a whole number of 3073-byte records"),
    ("label 10", r"'.*test_batch\.bin' record 0 has label 10"),
    ("no test batch", "has no test_batch.bin"),
    ("empty", "has no data_batch"),
])
def test_bad_batches_are_refused_naming_the_file(tmp_path, case, message):
    root = tmp_path / "c"
    write_cifar10(root)
    if case == "truncated":
        (root / "data_batch_1.bin").write_bytes((root / "data_batch_1.bin").read_bytes()[:2 * RECORD - 1])
    elif case == "label 10":
        raw = bytearray((root / "test_batch.bin").read_bytes())
        raw[0] = 10
        (root / "test_batch.bin").write_bytes(bytes(raw))
    elif case == "no test batch":
        (root / "test_batch.bin").unlink()
    else:
        for f in root.glob("data_batch_*"):
            f.unlink()
    with pytest.raises(DatasetError, match=message):
        load_dataset(f"cifar10:{root}")


def write_cifar10c(root: Path, rows_per_severity: int = 20) -> None:
    """fog.npy whose every pixel of severity s's block is s (and labels.npy), the published layout."""
    root.mkdir()
    n = 5 * rows_per_severity
    images = np.repeat(np.arange(1, 6, dtype=np.uint8), rows_per_severity)[:, None, None, None]
    np.save(root / "fog.npy", np.broadcast_to(images, (n, 32, 32, 3)).copy())
    np.save(root / "labels.npy", np.tile(np.arange(10, dtype=np.uint8), n // 10))


@pytest.mark.parametrize("severity", [1, 3, 5])
def test_cifar10c_reads_exactly_the_block_of_a_severity(tmp_path, severity):
    write_cifar10c(tmp_path / "cc")
    ds = load_dataset(f"cifar10-c:{tmp_path / 'cc'}?corruption=fog&severity={severity}")
    assert ds.n_train + ds.n_test == 20 and ds.shape == (32, 32, 3) and ds.corruption is None
    assert np.all(np.rint(np.concatenate([ds.x_train, ds.x_test]) * 255) == severity)
    assert np.bincount(np.concatenate([ds.y_train, ds.y_test])).tolist() == [2] * 10


@pytest.mark.parametrize("query, message", [
    ("corruption=snow&severity=1", "there is no snow.npy; the folder holds: fog"),
    ("severity=1", "give corruption=NAME"),
    ("corruption=fog", "give severity=1..5"),
    ("corruption=fog&severity=6", "give severity=1..5"),
])
def test_cifar10c_selection_errors(tmp_path, query, message):
    write_cifar10c(tmp_path / "cc")
    with pytest.raises(DatasetError, match=message):
        load_dataset(f"cifar10-c:{tmp_path / 'cc'}?{query}")


@pytest.mark.parametrize("case, message", [
    ("float images", r"fog\.npy' holds float32 .*uint8"),
    ("rows not in five blocks", "not five equal severity blocks"),
    ("label out of range", "holds label 12; CIFAR-10 labels are 0..9"),
    ("fewer labels", "has 100 rows but"),
    ("no labels", "has no labels.npy"),
    ("pickled objects", "holds Python objects that need pickle"),
])
def test_bad_cifar10c_files_are_refused(tmp_path, case, message):
    root = tmp_path / "cc"
    write_cifar10c(root)
    if case == "float images":
        np.save(root / "fog.npy", np.zeros((100, 32, 32, 3), np.float32))
    elif case == "rows not in five blocks":
        np.save(root / "fog.npy", np.zeros((99, 32, 32, 3), np.uint8))
    elif case == "label out of range":
        np.save(root / "labels.npy", np.full(100, 12, np.uint8))
    elif case == "pickled objects":
        with open(root / "fog.npy", "wb") as f:      # the header of an object array, no pickle after it
            np.lib.format.write_array_header_1_0(f, {"descr": "|O", "fortran_order": False, "shape": (100,)})
    elif case == "fewer labels":
        np.save(root / "labels.npy", np.zeros(50, np.uint8))
    else:
        (root / "labels.npy").unlink()
    with pytest.raises(DatasetError, match=message):
        load_dataset(f"cifar10-c:{root}?corruption=fog&severity=2")
