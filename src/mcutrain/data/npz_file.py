"""A user's own data as one `.npz` file: `--dataset path/to/data.npz`, `mcutrain.train(m, "data.npz")`.

The file holds `x` (N x H x W x C images, or N x features) and `y` (N integer labels
0..K-1), and optionally `x_test` / `y_test`. Without them, a fixed stratified 20% of every
class of `x` is held out as the test split (seed 0, whatever `--seed` says, so `train` and
`eval` on the same file always test on the same samples; the `digits` rule).

What the samples become (float32 NHWC, as every dataset): uint8 is taken as pixels and
scaled by 1/255 to [0, 1]; every other type (floats, other integers) is kept as its values.
N x features becomes N x 1 x features x 1, the layout of a 1-D signal (mnist1d's).

Which argument is a file: one that ends in `.npz` (any case). A spec never does (its grammar
has no `.`), so `runs/a[0-4]:b.npz` is a file and `digits[0-4]` a spec, with no guessing
from what exists on disk.

The file is read as hostile input, through `mcutrain.npz_members` as model files are: only
the four arrays above are read (other members are never decompressed), each header is
checked (no pickled objects, plain integer or float types, at most
`limits.MAX_DATASET_ELEMENTS` elements) and the shapes against each other before any data.

Example:
    >>> np.savez("mine.npz", x=images_uint8, y=labels)          # (N, 28, 28, 1), (N,)
    >>> ds = load_npz("mine.npz")
    >>> ds.x_train.dtype, ds.n_test
    (dtype('float32'), ...)
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np

from mcutrain import limits
from mcutrain.data.dataset import Dataset, DatasetError
from mcutrain.data.splits import stratified_split
from mcutrain.npz_members import Refused, member_data, member_header, open_zip, zip_members

SUFFIX = ".npz"
TEST_FRACTION, SPLIT_SEED = 0.2, 0
"""The held-out share of every class when the file has no `x_test`/`y_test`, and its fixed seed."""
HOW = "save it with np.savez(PATH, x=samples, y=labels[, x_test=..., y_test=...])"


def is_npz_path(text: object) -> bool:
    """Whether a dataset argument names a file: a string ending in `.npz` (see the module docstring)."""
    return isinstance(text, str) and text.lower().endswith(SUFFIX)


def _read(path: Path) -> dict[str, np.ndarray]:
    """The arrays x, y and (when present) x_test, y_test, with shapes checked before data is read."""
    with open_zip(path, ".npz file") as z:
        members = zip_members(z)
        names = [n for n in ("x", "y", "x_test", "y_test") if n + ".npy" in members]
        for need in ("x", "y"):
            if need not in names:
                held = ", ".join(sorted(m.removesuffix(".npy") for m in members)) or "nothing"
                raise Refused(f"has no array '{need}' (it holds: {held[:200]}); {HOW}")
        if ("x_test" in names) != ("y_test" in names):
            have, lack = ("x_test", "y_test") if "x_test" in names else ("y_test", "x_test")
            raise Refused(f"has '{have}' but no '{lack}'; give both test arrays or neither")
        heads = {n: member_header(z, members[n + ".npy"], n, limits.MAX_DATASET_ELEMENTS) for n in names}
        for xs, ys in (("x", "y"), ("x_test", "y_test")):
            if xs in heads:
                _check_shapes(xs, heads[xs].shape, ys, heads[ys].shape)
        if "x_test" in heads and heads["x_test"].shape[1:] != heads["x"].shape[1:]:
            raise Refused(f"x_test has samples of shape {heads['x_test'].shape[1:]} but x "
                          f"{heads['x'].shape[1:]}; both splits need one sample shape")
        return {n: member_data(z, members[n + ".npy"], heads[n], n) for n in names}


def _check_shapes(xs: str, x_shape: tuple[int, ...], ys: str, y_shape: tuple[int, ...]) -> None:
    if len(x_shape) not in (2, 4):
        hint = f"; for grey images add a channel axis ({xs}[..., None])" if len(x_shape) == 3 else ""
        raise Refused(f"array '{xs}' has shape {x_shape}; samples are N x H x W x C (images) or "
                      f"N x features{hint}")
    if len(y_shape) != 1:
        hint = f" ({ys}.ravel())" if len(y_shape) == 2 and y_shape[1] == 1 else ""
        raise Refused(f"array '{ys}' has shape {y_shape}; labels are one class number per sample, "
                      f"shape (N,){hint}")
    if x_shape[0] != y_shape[0]:
        raise Refused(f"'{xs}' holds {x_shape[0]} samples but '{ys}' {y_shape[0]} labels; "
                      "give one label per sample")
    if x_shape[0] == 0:
        raise Refused(f"array '{xs}' holds no samples")


def _samples(name: str, x: np.ndarray) -> np.ndarray:
    """float32 NHWC: uint8 scaled by 1/255, anything else kept as its values; finite values only."""
    if x.ndim == 2:
        x = x[:, None, :, None]
    if x.dtype == np.uint8:
        return x.astype(np.float32) * np.float32(1.0 / 255.0)
    with np.errstate(over="ignore", invalid="ignore"):
        out = x.astype(np.float32)
    bad = ~np.isfinite(out).reshape(len(out), -1).all(axis=1)
    if bad.any():
        raise Refused(f"array '{name}' holds NaN, infinite or beyond-float32 values in {int(bad.sum())} "
                      f"samples (the first is sample {int(np.argmax(bad))}); remove or replace them")
    return out


def _labels(name: str, y: np.ndarray) -> np.ndarray:
    if y.dtype.kind not in "iu":
        raise Refused(f"array '{name}' has type {y.dtype}; labels are integer class numbers 0..K-1 "
                      f"(convert them: {name}.astype(np.int64))")
    lo, hi = int(y.min()), int(y.max())
    if lo < 0:
        raise Refused(f"array '{name}' holds the negative label {lo}; labels are class numbers 0..K-1")
    if hi >= limits.MAX_CLASSES:
        raise Refused(f"array '{name}' holds the label {hi}; labels are class numbers below "
                      f"{limits.MAX_CLASSES:,} (the most outputs a model may have)")
    return y.astype(np.int64)


def load_npz(path: str) -> Dataset:
    """The Dataset in the `.npz` file at `path`, named by `path` as given; DatasetError on any fault."""
    where = f"dataset file '{path}'"
    p = Path(path)
    if not p.is_file():
        what = "is not a file" if p.exists() else "does not exist"
        raise DatasetError(f"{where} {what}; give an .npz file with arrays x and y ({HOW})")
    try:
        arrays = _read(p)
        x, y = _samples("x", arrays["x"]), _labels("y", arrays["y"])
        present = np.unique(y)
        if len(present) < 2:
            raise Refused(f"labels 'y' hold only class {int(present[0])}; classification needs "
                          "samples of at least two classes")
        if "x_test" in arrays:
            x_te, y_te = _samples("x_test", arrays["x_test"]), _labels("y_test", arrays["y_test"])
        else:
            x, y, x_te, y_te = stratified_split(x, y, TEST_FRACTION, SPLIT_SEED)
            if len(y_te) == 0:
                raise Refused(f"its {len(y)} samples are too few to hold out a test split "
                              f"({TEST_FRACTION:.0%} of every class); add samples or give x_test/y_test")
    except Refused as e:
        msg = str(e)
        raise DatasetError(f"{where}{' ' if msg.startswith(('is ', 'has ')) else ': '}{msg}") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as e:
        raise DatasetError(f"{where} is not a readable .npz file ({str(e)[:160]}); it may be truncated "
                           f"or corrupt: {HOW}") from None
    pixels = all(a.dtype == np.uint8 for k, a in arrays.items() if k.startswith("x"))
    value_range = (0.0, 1.0) if pixels else (float(min(x.min(), x_te.min())), float(max(x.max(), x_te.max())))
    return Dataset(path, x, y, x_te, y_te, source=where, value_range=value_range, classes_known=False)
