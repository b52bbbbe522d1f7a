"""CIFAR-10 and CIFAR-10-C as they come on disk: `cifar10:FOLDER`, `cifar10-c:FOLDER?corruption=fog&...`.

**CIFAR-10, binary version** (`cifar-10-binary.tar.gz`, unpacked: `cifar-10-batches-bin/`):
`data_batch_1.bin` .. `data_batch_5.bin` (the training split: every `data_batch_*.bin`
present) and `test_batch.bin`, each a run of 3073-byte records: one label byte 0..9, then
the 32x32 image as 1024 red, 1024 green and 1024 blue bytes, rows top to bottom.
`batches.meta.txt`, when present, names the classes (one per line); else the published
names. Options: `classes=`, `corruption=` / `severity=` as for every image dataset.

**CIFAR-10-C** (Hendrycks & Dietterich 2019; the files the ZO seed adapts on): one
`<corruption>.npy` per corruption, uint8 (N, 32, 32, 3), and `labels.npy` (N,), the five
severities in five equal blocks of rows, 1 first (10,000 rows each in the published files).
`corruption=NAME` (required: any NAME with a NAME.npy in the folder) and `severity=1..5`
(required) select one block; only that block's bytes are read. It is the test set of
CIFAR-10 corrupted, so the dataset's own split is a held-out `test=` (default 0.2) of
every class, stratified, seed `split_seed=` (default 0); `classes=` works too.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from mcutrain import limits
from mcutrain.data.dataset import Dataset, DatasetError
from mcutrain.data.source_dataset import IMAGE_OPTIONS, SPLIT_OPTIONS, build, held_out
from mcutrain.data.source_spec import SourceSpec
from mcutrain.npz_members import Refused, read_exact, read_header

RECORD = 1 + 3 * 32 * 32
CLASS_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
SEVERITIES = 5
CIFAR10_OPTIONS = IMAGE_OPTIONS
CIFAR10C_OPTIONS = ("corruption", "severity", "classes", *SPLIT_OPTIONS)


def _folder(spec: SourceSpec) -> Path:
    root = Path(spec.path)
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise DatasetError(f"dataset '{spec}': '{root}' {what}; {spec.kind}:FOLDER takes the unpacked folder")
    return root


def cifar10_files(spec: SourceSpec) -> tuple[list[Path], Path]:
    """(the training batches, the test batch) in FOLDER; refused when either is missing."""
    root = _folder(spec)
    train = sorted(root.glob("data_batch_*.bin"))
    test = root / "test_batch.bin"
    if not train or not test.is_file():
        lack = "data_batch_*.bin" if not train else "test_batch.bin"
        raise DatasetError(f"dataset '{spec}': '{root}' has no {lack}; give the folder of CIFAR-10's binary "
                           "version (cifar-10-batches-bin: data_batch_1.bin .. data_batch_5.bin, "
                           "test_batch.bin)")
    return train, test


def read_batch(spec: SourceSpec, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """uint8 NHWC images and int64 labels of one binary batch file, its size and labels checked."""
    size = path.stat().st_size
    if size == 0 or size % RECORD:
        raise DatasetError(f"dataset '{spec}': '{path}' holds {size:,} bytes, not a whole number of "
                           f"{RECORD}-byte records (1 label byte + 3072 pixel bytes); it is truncated or "
                           "not a CIFAR-10 binary batch")
    if size // RECORD * 3072 > limits.MAX_DATASET_ELEMENTS:
        raise DatasetError(f"dataset '{spec}': '{path}' holds more than {limits.MAX_DATASET_ELEMENTS:,} "
                           "pixels")
    records = np.fromfile(path, np.uint8).reshape(-1, RECORD)
    labels = records[:, 0].astype(np.int64)
    if labels.max() >= len(CLASS_NAMES):
        bad = int(np.argmax(labels >= len(CLASS_NAMES)))
        raise DatasetError(f"dataset '{spec}': '{path}' record {bad} has label {labels[bad]}; CIFAR-10 "
                           "labels are 0..9")
    return records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels


def _class_names(spec: SourceSpec, root: Path) -> tuple[str, ...]:
    meta = root / "batches.meta.txt"
    if not meta.is_file():
        return CLASS_NAMES
    names = tuple(line.strip() for line in meta.read_text(errors="replace").splitlines() if line.strip())
    if len(names) != len(CLASS_NAMES):
        raise DatasetError(f"dataset '{spec}': '{meta}' names {len(names)} classes, CIFAR-10 has 10")
    return names


def load_cifar10(spec: SourceSpec, seed: int = 0, sample_shape: tuple[int, ...] | None = None) -> Dataset:
    """CIFAR-10's train and test split from its binary batch files (see the module docstring)."""
    spec.refuse_unknown(CIFAR10_OPTIONS)
    train, test = cifar10_files(spec)
    parts = [read_batch(spec, p) for p in train]
    x_te, y_te = read_batch(spec, test)
    scale = np.float32(1.0 / 255.0)
    arrays = (np.concatenate([p[0] for p in parts]).astype(np.float32) * scale,
              np.concatenate([p[1] for p in parts]), x_te.astype(np.float32) * scale, y_te)
    return build(spec, arrays, _class_names(spec, Path(spec.path)), f"CIFAR-10 binary files in '{spec.path}'",
                 seed=seed)


def cifar10c_files(spec: SourceSpec) -> tuple[Path, Path]:
    """(`<corruption>.npy`, `labels.npy`) in FOLDER, the corruption named by its option."""
    root = _folder(spec)
    name = spec.text_of("corruption")
    have = sorted(p.stem for p in root.glob("*.npy") if p.stem != "labels")
    if name is None or not re.fullmatch(r"[a-z0-9_]+", name) or not (root / f"{name}.npy").is_file():
        why = "give corruption=NAME" if name is None else f"there is no {name}.npy"
        raise DatasetError(f"dataset '{spec}': {why}; the folder holds: {', '.join(have) or 'no .npy files'}")
    labels = root / "labels.npy"
    if not labels.is_file():
        raise DatasetError(f"dataset '{spec}': '{root}' has no labels.npy")
    return root / f"{name}.npy", labels


def _block(spec: SourceSpec, path: Path, severity: int, image: bool) -> np.ndarray:
    """Rows of severity `severity` (its fifth of the file), the header checked before any data."""
    try:
        with open(path, "rb") as f:
            h = read_header(f, path.name, limits.MAX_DATASET_ELEMENTS * SEVERITIES)
            want = "uint8 (N, H, W, 1 or 3) images" if image else "integer labels (N,)"
            ok = (h.dtype == np.uint8 and len(h.shape) == 4 and h.shape[3] in (1, 3)) if image else \
                (h.dtype.kind in "iu" and len(h.shape) == 1)
            if not ok or h.fortran:
                raise Refused(f"holds {h.dtype} {h.shape}; CIFAR-10-C files hold {want}")
            n = h.shape[0]
            if n == 0 or n % SEVERITIES:
                raise Refused(f"holds {n} rows, not five equal severity blocks")
            rows, row_bytes = n // SEVERITIES, h.nbytes // n
            f.seek(h.offset + (severity - 1) * rows * row_bytes)
            data = np.frombuffer(read_exact(f, rows * row_bytes, f"'{path.name}'"), h.dtype)
    except Refused as e:
        raise DatasetError(f"dataset '{spec}': '{path}' {e}") from None
    except OSError as e:
        raise DatasetError(f"dataset '{spec}': cannot read '{path}' ({e})") from None
    return data.reshape(rows, *h.shape[1:]).astype(h.dtype.newbyteorder("="))


def load_cifar10c(spec: SourceSpec, seed: int = 0, sample_shape: tuple[int, ...] | None = None) -> Dataset:
    """One corruption at one severity of CIFAR-10-C, split for training (see the module docstring)."""
    spec.refuse_unknown(CIFAR10C_OPTIONS)
    images, labels = cifar10c_files(spec)
    severity = spec.int_of("severity")
    if severity is None or not 1 <= severity <= SEVERITIES:
        raise DatasetError(f"dataset '{spec}': give severity=1..5 (the block of rows to read)")
    x, y = _block(spec, images, severity, True), _block(spec, labels, severity, False).astype(np.int64)
    if len(x) != len(y):
        raise DatasetError(f"dataset '{spec}': '{images}' has {len(x) * SEVERITIES} rows but '{labels}' "
                           f"{len(y) * SEVERITIES}")
    if y.min() < 0 or y.max() >= len(CLASS_NAMES):
        bad = int(y.max() if y.max() >= len(CLASS_NAMES) else y.min())
        raise DatasetError(f"dataset '{spec}': '{labels}' holds label {bad}; CIFAR-10 labels are 0..9")
    x_tr, y_tr, x_te, y_te = held_out(spec, x, y)
    scale = np.float32(1.0 / 255.0)
    arrays = (x_tr.astype(np.float32) * scale, y_tr, x_te.astype(np.float32) * scale, y_te)
    return build(spec, arrays, CLASS_NAMES, f"CIFAR-10-C '{images}' severity {severity}", seed=seed,
                 images=False, value_range=(0.0, 1.0))
