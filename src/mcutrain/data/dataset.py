"""The `Dataset` every trainer receives: arrays, labels and where they came from."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

from mcutrain.data.corruptions import corrupt


class DatasetError(ValueError):
    """A dataset that cannot be loaded as asked; the message says why and what to do."""


def _labels(name: str, split: str, y) -> np.ndarray:
    """`y` as int64 labels, refusing NaN, fractions, negatives and non-numbers (naming the split)."""
    raw = np.asarray(y)
    if raw.ndim != 1:
        raise DatasetError(f"dataset '{name}': {split} labels must be one-dimensional, got shape "
                           f"{raw.shape}")
    if raw.dtype.kind == "f":
        if not np.all(np.isfinite(raw)):
            raise DatasetError(f"dataset '{name}': {int(np.sum(~np.isfinite(raw)))} {split} labels are NaN "
                               "or infinite; labels are class numbers 0..K-1")
        if np.any(raw != np.round(raw)):
            raise DatasetError(f"dataset '{name}': {split} labels must be whole class numbers, got fractions")
    elif raw.dtype.kind not in "iub":
        raise DatasetError(f"dataset '{name}': {split} labels must be class numbers, got type {raw.dtype}")
    if raw.size and (raw.min() < 0 or raw.max() >= 1 << 31):
        raise DatasetError(f"dataset '{name}': {split} labels must be in 0..K-1, got "
                           f"{raw.min()}..{raw.max()}")
    return raw.astype(np.int64)


class Dataset:
    """A train/test pair of NHWC float32 arrays with int64 labels 0..num_classes-1.

    `name` is the dataset spec; `classes[i]` is the original class id of label i
    (a subset `fashion-mnist[5-9]` has labels 0..4 and classes (5, 6, 7, 8, 9));
    `source` says where the data was found. Images are in [0, 1]; mnist1d signals
    are standardized floats (see `value_range`).

    `classes_known` is False when only the labels tell the classes (a user's `.npz` file:
    `num_classes` is the largest label + 1); a model with more outputs then keeps them rather
    than getting a new head, and labels beyond its outputs are refused.

    With a corruption, `x_train`/`x_test` are the clean arrays corrupted on first
    access (train with stream 0, test with stream 1 of `seed`) and then kept, so an
    adaptation run that only uses the test set never pays for corrupting the train set.

    `preprocessing` says what was done to the samples that a device must do the same way
    before its model sees them (a time series' per-channel normalization: `{"normalize":
    {"mean": [...], "std": [...]}}`, x' = (x - mean) / std per channel); empty when nothing was.
    """

    def __init__(self, name: str, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                 y_test: np.ndarray, *, classes: tuple[int, ...] | None = None, source: str = "",
                 class_names: tuple[str, ...] = (), value_range: tuple[float, float] = (0.0, 1.0),
                 corruption: str | None = None, severity: int = 0, seed: int = 0,
                 classes_known: bool = True, preprocessing: dict[str, Any] | None = None):
        self.name = name
        self.clean_train = x_train
        self.clean_test = x_test
        self.y_train = _labels(name, "train", y_train)
        self.y_test = _labels(name, "test", y_test)
        labels = np.concatenate([self.y_train, self.y_test])
        self.num_classes = int(labels.max()) + 1 if classes is None and labels.size else len(classes or ())
        self.classes = tuple(range(self.num_classes)) if classes is None else tuple(int(c) for c in classes)
        self.source = source
        self.class_names = tuple(class_names)
        self.value_range = value_range
        self.corruption = corruption
        self.severity = severity
        self.seed = seed
        self.classes_known = classes_known
        self.preprocessing = dict(preprocessing or {})
        self.validate()

    def validate(self) -> None:
        """Refuse a dataset no method can train on or be measured on (DatasetError naming it).

        Checked: both splits non-empty with one label per sample, samples (N, H, W, C) of one
        shape and finite, labels below the number of classes, at least two classes and at
        least two of them present in the training split (one when it holds one sample).
        """
        where = f"dataset '{self.name}'"
        splits = (("train", self.clean_train, self.y_train), ("test", self.clean_test, self.y_test))
        for split, x, y in splits:
            if not isinstance(x, np.ndarray) or x.ndim != 4 or x.dtype.kind != "f":
                kind = f"{x.dtype} {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__
                raise DatasetError(f"{where}: {split} samples must be a float (N, H, W, C) array, got {kind}")
            if len(x) == 0:
                raise DatasetError(f"{where}: the {split} split is empty")
            if len(x) != len(y):
                raise DatasetError(f"{where}: {len(x)} {split} samples but {len(y)} labels")
            if not np.isfinite(x).all():
                raise DatasetError(f"{where}: {split} samples hold NaN or infinite values")
        if self.clean_train.shape[1:] != self.clean_test.shape[1:]:
            raise DatasetError(f"{where}: train samples {self.clean_train.shape[1:]} and test samples "
                               f"{self.clean_test.shape[1:]} differ in shape")
        if self.num_classes < 2:
            raise DatasetError(f"{where}: has {self.num_classes} class; classification needs at least two")
        top = int(max(self.y_train.max(), self.y_test.max()))
        if top >= self.num_classes:
            raise DatasetError(f"{where}: label {top} is out of range for {self.num_classes} classes")
        present = len(np.unique(self.y_train))
        if present < min(2, self.n_train):
            raise DatasetError(f"{where}: the training split holds only class {self.y_train[0]}; "
                               "training needs samples of at least two classes")

    def _maybe_corrupt(self, x: np.ndarray, stream: int) -> np.ndarray:
        if not self.corruption:
            return x
        return corrupt(x, self.corruption, self.severity, self.seed, stream=stream)

    @cached_property
    def x_train(self) -> np.ndarray:
        return self._maybe_corrupt(self.clean_train, 0)

    @cached_property
    def x_test(self) -> np.ndarray:
        return self._maybe_corrupt(self.clean_test, 1)

    @property
    def shape(self) -> tuple[int, ...]:
        """Per-sample shape (H, W, C)."""
        return tuple(self.clean_train.shape[1:])

    @property
    def n_train(self) -> int:
        return len(self.y_train)

    @property
    def n_test(self) -> int:
        return len(self.y_test)

    def __repr__(self) -> str:
        return (f"Dataset({self.name!r}, train={self.n_train}, test={self.n_test}, shape={self.shape}, "
                f"classes={self.classes}, source={self.source!r})")
