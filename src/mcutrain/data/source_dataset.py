"""What every source-spec loader shares: the held-out split, class subsets, corruptions, the Dataset.

Each loader (image folder, time series, CIFAR, Speech Commands) reads its files into arrays
and class names; this module turns them into the one `Dataset` every trainer takes, with the
same rules for all of them: a stratified held-out split with a fixed seed when the files bring
no test split of their own, `classes=0-4` keeping and relabelling classes as the registry's
`NAME[0-4]` does, and `corruption=NAME&severity=S` corrupting image data as `NAME-c:...` does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.data import cache
from mcutrain.data.corruptions import CORRUPTIONS
from mcutrain.data.dataset import Dataset, DatasetError
from mcutrain.data.source_spec import SourceSpec
from mcutrain.data.splits import stratified_split

TEST_FRACTION, SPLIT_SEED = 0.2, 0
"""The default held-out share of every class (option `test=`) and the split's default seed
(option `split_seed=`): fixed, whatever `--seed` says, so `train` and `eval` test on the same
samples."""
SPLIT_OPTIONS = ("test", "split_seed")
IMAGE_OPTIONS = ("classes", "corruption", "severity")


def cached(spec: SourceSpec, files: list[Path], extra: object,
           compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """`compute()`'s arrays, kept in the cache (`data.cache`) for this PATH and these options and
    used again while no file changed (paths, sizes, mtimes): decoding thousands of images or WAV
    files each time a command starts would cost more than the training step being tried."""
    where = json.dumps([str(Path(spec.path).resolve()), spec.kind, extra], sort_keys=True, default=str)
    name = "sources/" + hashlib.sha256(where.encode()).hexdigest()[:16]
    key = cache.files_key(files, extra=f"{spec.kind}-v1")
    arrays = cache.load_arrays(name, key)
    if arrays is None:
        arrays = compute()
        cache.save_arrays(name, key, arrays)
    return arrays


def held_out(spec: SourceSpec, x: np.ndarray, y: np.ndarray):
    """(x_tr, y_tr, x_te, y_te): `test=` of every class held out, seeded by `split_seed=`."""
    fraction = spec.fraction_of("test", TEST_FRACTION)
    seed = spec.int_of("split_seed", SPLIT_SEED, low=0)
    x_tr, y_tr, x_te, y_te = stratified_split(x, y, fraction, seed)
    if len(y_te) == 0 or len(y_tr) == 0:
        raise DatasetError(f"dataset '{spec}': its {len(y)} samples are too few to hold out a test split "
                           f"({fraction:.0%} of every class); add samples")
    return x_tr, y_tr, x_te, y_te


def check_classes(spec: SourceSpec, names: tuple[str, ...], where: str) -> None:
    """Refuse data of fewer than two classes (naming where they were looked for)."""
    if len(names) < 2:
        held = f"only the class '{names[0]}'" if names else "no class"
        raise DatasetError(f"dataset '{spec}': {where} holds {held}; classification needs at least two")


def corruption_of(spec: SourceSpec) -> tuple[str | None, int]:
    """`corruption=NAME&severity=S` (severity 1..5, default 3), or (None, 0)."""
    name = spec.text_of("corruption")
    if name is None:
        if "severity" in spec.options:
            raise DatasetError(f"dataset '{spec}': severity= goes with corruption=NAME")
        return None, 0
    if name not in CORRUPTIONS:
        raise DatasetError(f"dataset '{spec}': unknown corruption '{name}' (known: {', '.join(CORRUPTIONS)})")
    severity = spec.int_of("severity", 3)
    if not 1 <= severity <= 5:
        raise DatasetError(f"dataset '{spec}': severity {severity} is outside 1..5")
    return name, severity


def build(spec: SourceSpec, arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
          names: tuple[str, ...], source: str, *, seed: int = 0, images: bool = True,
          preprocessing: dict[str, Any] | None = None,
          value_range: tuple[float, float] | None = None) -> Dataset:
    """The Dataset of `arrays` (x_tr, y_tr, x_te, y_te; labels index `names`) after `classes=` and,
    for images, `corruption=` (corrupted with `seed`, as the registry's `-c:` specs are)."""
    x_tr, y_tr, x_te, y_te = arrays
    classes = spec.classes_of()
    kept = tuple(range(len(names)))
    if classes is not None:
        bad = [c for c in classes if c >= len(names)]
        if bad or len(classes) < 2:
            raise DatasetError(f"dataset '{spec}': it has classes 0..{len(names) - 1}; classes= needs at "
                               "least two of them" + (f" (not {bad})" if bad else ""))
        remap = np.full(len(names), -1, np.int64)
        remap[list(classes)] = np.arange(len(classes))
        keep_tr, keep_te = remap[y_tr] >= 0, remap[y_te] >= 0
        x_tr, y_tr, x_te, y_te = x_tr[keep_tr], remap[y_tr[keep_tr]], x_te[keep_te], remap[y_te[keep_te]]
        kept = classes
    corruption, severity = corruption_of(spec) if images else (None, 0)
    if value_range is None:
        value_range = (0.0, 1.0) if images else (float(min(x_tr.min(), x_te.min())),
                                                   float(max(x_tr.max(), x_te.max())))
    return Dataset(str(spec), x_tr, y_tr, x_te, y_te, classes=kept, source=source,
                   class_names=tuple(names[c] for c in kept), value_range=value_range,
                   corruption=corruption, severity=severity, seed=seed, preprocessing=preprocessing)
