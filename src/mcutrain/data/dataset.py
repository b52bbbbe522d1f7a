"""The `Dataset` every trainer receives: arrays, labels and where they came from."""

from __future__ import annotations

from functools import cached_property

import numpy as np

from mcutrain.data.corruptions import corrupt


class Dataset:
    """A train/test pair of NHWC float32 arrays with int64 labels 0..num_classes-1.

    `name` is the dataset spec; `classes[i]` is the original class id of label i
    (a subset `fashion-mnist[5-9]` has labels 0..4 and classes (5, 6, 7, 8, 9));
    `source` says where the data was found. Images are in [0, 1]; mnist1d signals
    are standardized floats (see `value_range`).

    With a corruption, `x_train`/`x_test` are the clean arrays corrupted on first
    access (train with stream 0, test with stream 1 of `seed`) and then kept, so an
    adaptation run that only uses the test set never pays for corrupting the train set.
    """

    def __init__(self, name: str, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                 y_test: np.ndarray, *, classes: tuple[int, ...] | None = None, source: str = "",
                 class_names: tuple[str, ...] = (), value_range: tuple[float, float] = (0.0, 1.0),
                 corruption: str | None = None, severity: int = 0, seed: int = 0):
        self.name = name
        self.clean_train = x_train
        self.clean_test = x_test
        self.y_train = np.asarray(y_train, np.int64)
        self.y_test = np.asarray(y_test, np.int64)
        labels = np.concatenate([self.y_train, self.y_test])
        self.num_classes = int(labels.max()) + 1 if classes is None and labels.size else len(classes or ())
        self.classes = tuple(range(self.num_classes)) if classes is None else tuple(int(c) for c in classes)
        self.source = source
        self.class_names = tuple(class_names)
        self.value_range = value_range
        self.corruption = corruption
        self.severity = severity
        self.seed = seed

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
