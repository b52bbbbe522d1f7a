"""Time series (IMU, vibration): `csv:FILE?window=128&stride=64&label=activity`, or `npy:FILE?...`.

A recording is a table: one row per time step, one column per channel, and a label column
(the class at that step). A CSV has a header row naming its columns; a `.npy` is a 2-D
float array whose columns are numbered from 0. PATH may also be a folder of such files
(`*.csv` or `*.npy`), each its own recording: no window crosses two files.

Options:
- `window=N` (required): rows per sample; `stride=S` (default N): rows from one window's
  start to the next.
- `label=COLUMN`: the label column (CSV: its name, default `label`; npy: its number,
  default the last). Labels are sorted (as numbers when all are whole numbers, else as text)
  and numbered 0..K-1; `Dataset.class_names` keeps the values.
- `columns=a,b,c`: the channels, in this order (default every other column).
- `test=F` (default 0.2): the last F of every class's windows in time order are the test
  split; training windows that overlap a test window are dropped, so no row is in both.
- `normalize=channel|none` (default channel): each channel is standardized with the mean
  and standard deviation of the training windows (a constant channel keeps std 1), and the
  figures are kept in `Dataset.preprocessing["normalize"]` (and the train JSON) so a device
  applies the same `x' = (x - mean) / std`.

A window whose rows carry two labels is dropped. Each window becomes a (1, N, C) sample,
the layout of 1-D signals (`mnist1d`'s), channels last.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import limits
from mcutrain.data.dataset import Dataset, DatasetError
from mcutrain.data.source_dataset import TEST_FRACTION, build, check_classes
from mcutrain.data.source_spec import SourceSpec

OPTIONS = ("window", "stride", "label", "columns", "test", "normalize", "classes")
MAX_ROWS = 1 << 26


def files_of(spec: SourceSpec) -> list[Path]:
    """The recordings: PATH itself, or the `*.csv` / `*.npy` files of the folder PATH, sorted."""
    p = Path(spec.path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix.lower() == "." + spec.kind and f.is_file())
        if not files:
            raise DatasetError(f"dataset '{spec}': folder '{p}' holds no .{spec.kind} files")
        return files
    if not p.is_file():
        raise DatasetError(f"dataset '{spec}': '{p}' does not exist; {spec.kind}:PATH takes a "
                           f".{spec.kind} file or a folder of them")
    return [p]


def _read_csv(spec: SourceSpec, path: Path) -> tuple[list[str], np.ndarray]:
    """The header and the cells (as text, T x K) of a CSV, refusing ragged rows."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise DatasetError(f"dataset '{spec}': cannot read '{path}' as CSV ({str(e)[:120]})") from None
    rows = [r for r in rows if r]
    if len(rows) < 2:
        raise DatasetError(f"dataset '{spec}': '{path}' has no data rows (a header row, then one row per "
                           "time step)")
    header = [h.strip() for h in rows[0]]
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    ragged = np.flatnonzero(lengths != len(header))
    if ragged.size:
        line = int(ragged[0]) + 1
        raise DatasetError(f"dataset '{spec}': '{path}' row {line} has {lengths[ragged[0]]} cells but the "
                           f"header {len(header)}; every row needs one cell per column")
    if len(rows) - 1 > MAX_ROWS:
        raise DatasetError(f"dataset '{spec}': '{path}' has more than {MAX_ROWS:,} rows")
    return header, np.array(rows[1:], dtype=str)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _numbers(spec: SourceSpec, path: Path, cells: np.ndarray, names: list[str]) -> np.ndarray:
    """Text cells as float64, refusing a non-number (row and column named) and NaN/inf."""
    cells = np.char.strip(cells)
    try:
        values = cells.astype(np.float64)
    except ValueError:
        # NOTE: only on the error path, cell by cell, to name the first bad one
        r, c = next((r, c) for r in range(len(cells)) for c in range(len(names))
                    if not _is_number(cells[r, c]))
        raise DatasetError(f"dataset '{spec}': '{path}' data row {r + 1}, column '{names[c]}' holds "
                           f"'{cells[r, c][:20]}', not a number") from None
    return _finite(spec, path, values, names)


def _finite(spec: SourceSpec, path: Path, values: np.ndarray, names: list[str]) -> np.ndarray:
    bad = ~np.isfinite(values)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise DatasetError(f"dataset '{spec}': '{path}' holds NaN or infinite values ({int(bad.sum())} "
                           f"cells; the first in data row {int(r) + 1}, column '{names[c]}'); remove or fill "
                           "them")
    return values


def _table(spec: SourceSpec, path: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(channel names, T x C float64 channels, T label values as text) of one recording."""
    if spec.kind == "csv":
        header, cells = _read_csv(spec, path)
        label = spec.text_of("label", "label")
        if label not in header:
            raise DatasetError(f"dataset '{spec}': '{path}' has no column '{label}' (its columns: "
                               f"{', '.join(header)[:200]}); name the label column with label=NAME")
        chosen = spec.list_of("columns") or tuple(h for h in header if h != label)
        missing = [c for c in chosen if c not in header]
        if missing or label in chosen:
            why = f"no column {missing}" if missing else f"the label column '{label}' among them"
            raise DatasetError(f"dataset '{spec}': columns= names {why}; its columns: "
                               f"{', '.join(header)[:200]}")
        idx = [header.index(c) for c in chosen]
        values = _numbers(spec, path, cells[:, idx], list(chosen))
        return list(chosen), values, np.char.strip(cells[:, header.index(label)])
    try:
        table = np.load(path, allow_pickle=False, mmap_mode="r")
    except (OSError, ValueError) as e:
        raise DatasetError(f"dataset '{spec}': cannot read '{path}' as .npy ({str(e)[:120]})") from None
    if table.size > limits.MAX_DATASET_ELEMENTS:
        raise DatasetError(f"dataset '{spec}': '{path}' holds {table.size:,} values, more than the limit "
                           f"{limits.MAX_DATASET_ELEMENTS:,}")
    if table.ndim != 2 or table.dtype.kind not in "iuf" or len(table) == 0:
        raise DatasetError(f"dataset '{spec}': '{path}' holds a {table.dtype} array of shape {table.shape}; "
                           "a time series is a 2-D number array, one row per time step")
    k = table.shape[1]
    label = spec.int_of("label", k - 1, low=0)
    given = spec.list_of("columns")
    if given is not None and not all(c.isdigit() for c in given):
        raise DatasetError(f"dataset '{spec}': columns={','.join(given)}; a .npy's columns are numbers "
                           f"0..{k - 1}")
    chosen = tuple(int(c) for c in given) if given else tuple(c for c in range(k) if c != label)
    if label >= k or any(c >= k or c == label for c in chosen) or not chosen:
        raise DatasetError(f"dataset '{spec}': '{path}' has columns 0..{k - 1}; label= and columns= must "
                           "name distinct columns among them (numbers)")
    names = [str(c) for c in chosen]
    values = _finite(spec, path, np.asarray(table[:, list(chosen)], np.float64), names)
    raw = _finite(spec, path, np.asarray(table[:, [label]], np.float64), [str(label)])[:, 0]
    if np.any(raw != np.round(raw)):
        raise DatasetError(f"dataset '{spec}': '{path}' label column {label} holds fractions; labels are "
                           "whole class numbers")
    return names, values, raw.astype(np.int64).astype(str)


def label_index(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct label values in class order, each value's class number): sorted numerically
    when all are whole numbers (`2` before `10`), else as text."""
    distinct, inverse = np.unique(values, return_inverse=True)
    if all(v.lstrip("-").isdigit() for v in distinct):
        order = np.argsort(distinct.astype(np.int64), kind="stable")
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        return distinct[order], rank[inverse]
    return distinct, inverse.astype(np.int64)


def windows(values: np.ndarray, labels: np.ndarray, window: int, stride: int):
    """(samples (n, window, C), labels (n,), starts (n,)) of the windows whose rows share one label."""
    starts = np.arange(0, len(values) - window + 1, stride)
    if starts.size == 0:
        return np.empty((0, window, values.shape[1])), np.empty(0, np.int64), starts
    changes = np.concatenate([[0], np.cumsum(labels[1:] != labels[:-1])])
    uniform = changes[starts + window - 1] == changes[starts]
    starts = starts[uniform]
    view = np.lib.stride_tricks.sliding_window_view(values, window, axis=0)   # (T-w+1, C, w)
    return view[starts].transpose(0, 2, 1), labels[starts], starts


def time_split(y: np.ndarray, position: np.ndarray, window: int,
               fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Boolean (train, test) masks: the last `fraction` of every class's windows (by `position`) are
    test; training windows that share a row with a test window are dropped."""
    order = np.lexsort((position, y))
    _, starts, counts = np.unique(y[order], return_index=True, return_counts=True)
    n_test = np.where(counts >= 2, np.clip(np.round(counts * fraction).astype(np.int64), 1, counts - 1), 0)
    rank = np.arange(len(y)) - np.repeat(starts, counts)
    test = np.zeros(len(y), bool)
    test[order] = rank >= np.repeat(counts - n_test, counts)
    t = np.sort(position[test])
    near = np.searchsorted(t, position)
    lo = np.abs(position - t[np.clip(near - 1, 0, len(t) - 1)]) if t.size else np.full(len(y), window)
    hi = np.abs(t[np.clip(near, 0, len(t) - 1)] - position) if t.size else np.full(len(y), window)
    train = ~test & (np.minimum(lo, hi) >= window)
    return train, test


def _normalized(spec: SourceSpec, x_tr: np.ndarray, x_te: np.ndarray, names: list[str]):
    mode = spec.text_of("normalize", "channel")
    if mode == "none":
        return x_tr, x_te, {}
    if mode != "channel":
        raise DatasetError(f"dataset '{spec}': normalize={mode}; write normalize=channel or normalize=none")
    mean = x_tr.mean(axis=(0, 1, 2))
    std = x_tr.std(axis=(0, 1, 2))
    std = np.where(std > 0, std, 1.0)
    norm = {"normalize": {"columns": names, "mean": [float(v) for v in mean], "std": [float(v) for v in std],
                          "formula": "x' = (x - mean) / std per channel, computed on the training split"}}
    return (x_tr - mean) / std, (x_te - mean) / std, norm


def load_timeseries(spec: SourceSpec, seed: int = 0, sample_shape: tuple[int, ...] | None = None) -> Dataset:
    """The Dataset of windows over the recording(s) at `spec.path` (see the module docstring)."""
    spec.refuse_unknown(OPTIONS)
    window = spec.int_of("window")
    if window is None:
        raise DatasetError(f"dataset '{spec}': give the window length, e.g. "
                           f"{spec.kind}:{spec.path}?window=128")
    stride = spec.int_of("stride", window)
    files = files_of(spec)
    tables = [_table(spec, f) for f in files]
    names = tables[0][0]
    for f, (n, _, _) in zip(files[1:], tables[1:]):
        if n != names:
            raise DatasetError(f"dataset '{spec}': '{f}' has channels {n} but '{files[0]}' {names}; "
                               "every recording needs the same columns")
    order, index = label_index(np.concatenate([t[2] for t in tables]))
    parts, offset, row = [], 0, 0
    for _, values, _ in tables:
        x, lab, starts = windows(values, index[row:row + len(values)], window, stride)
        parts.append((x, lab, starts + offset))
        offset += len(values) + window      # NOTE: a gap of a window: no two files' windows overlap
        row += len(values)
    x = np.concatenate([p[0] for p in parts]).astype(np.float32)
    y = np.concatenate([p[1] for p in parts]).astype(np.int64)
    position = np.concatenate([p[2] for p in parts])
    if len(y) == 0:
        raise DatasetError(f"dataset '{spec}': no window of {window} rows with one label fits the data; "
                           "lower window= or check the label column")
    present = np.unique(y)
    check_classes(spec, tuple(order[present]), f"the windows of '{spec.path}'")
    train, test = time_split(y, position, window, spec.fraction_of("test", TEST_FRACTION))
    if not train.any() or not test.any():
        raise DatasetError(f"dataset '{spec}': {len(y)} windows are too few for a train and a test split "
                           "that share no rows; add data or lower window=/stride=")
    x = x[:, None]
    x_tr, x_te, pre = _normalized(spec, x[train], x[test], names)
    arrays = (x_tr.astype(np.float32), y[train], x_te.astype(np.float32), y[test])
    return build(spec, arrays, tuple(str(v) for v in order), f"time series {len(files)} file(s) in "
                 f"'{spec.path}', {window}-row windows every {stride}", seed=seed, images=False,
                 preprocessing=_with_windows(pre, window, stride, names))


def _with_windows(pre: dict[str, Any], window: int, stride: int, names: list[str]) -> dict[str, Any]:
    return {"window": window, "stride": stride, "channels": names, **pre}
