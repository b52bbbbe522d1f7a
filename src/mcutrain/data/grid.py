"""A picture of what the corruptions do: samples by corruption (rows) and severity (columns).

Made so a person can see what a model is being adapted to before trusting a number.
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import numpy as np

from mcutrain.data.corruptions import CORRUPTIONS, SEVERITIES, corrupt
from mcutrain.data.registry import DatasetError, describe_spec, get_info, load_dataset
from mcutrain.data.spec import DatasetSpec, parse_spec
from mcutrain.io import atomic_write_bytes

MAX_ROWS_PER_BLOCK = 12


def _pick_samples(y: np.ndarray, count: int) -> np.ndarray:
    """Indices of `count` test samples cycling through the classes: the first of each class,
    then the second of each, ... (deterministic, no seed needed)."""
    order = np.argsort(y, kind="stable")
    _, starts, counts = np.unique(y[order], return_index=True, return_counts=True)
    k = np.arange(count)
    cls, nth = k % len(starts), k // len(starts)
    return order[starts[cls] + np.minimum(nth, counts[cls] - 1)]


def grid_rows(spec: DatasetSpec, seed: int = 0) -> tuple[list[str], np.ndarray, list[str]]:
    """Row labels, the image grid (rows, 1 + 5 severities, H, W, C) and the class name per row.

    A spec without a corruption gives one row per corruption (a different test image
    each); with a corruption, one row per class for that corruption.
    """
    info = get_info(spec.base)
    if info.kind == "generated":
        raise DatasetError(f"'{spec}': {info.name} holds 1-D signals; the corruption grid is for images")
    ds = load_dataset(DatasetSpec(spec.base, None, 0, spec.classes), seed)
    names = [spec.corruption] * min(ds.num_classes, 10) if spec.corruption else list(CORRUPTIONS)
    idx = _pick_samples(ds.y_test, len(names))
    x = ds.x_test[idx]
    cells = np.empty((len(names), 1 + len(SEVERITIES), *x.shape[1:]), np.float32)
    cells[:, 0] = x
    for r, name in enumerate(names):
        for s in SEVERITIES:
            cells[r, s] = corrupt(x[r:r + 1], name, s, seed, stream=1)[0]
    labels = [n.replace("_", " ") for n in names]
    return labels, cells, [ds.class_names[int(ds.y_test[i])] for i in idx]


CELL, LABEL_W, LINE_H, HEAD_H, MARGIN = 0.8, 1.35, 0.22, 0.3, 0.2
"""Layout in inches: image cell (with its gap), row-label column (at least), title line, column
header, margin."""
CHAR_W = 0.085
"""Inches per character of a row label at font size 9 (DejaVu Sans, generous: a label must not
run into the block beside it, as "jpeg compression" did)."""


def label_width(names: list[str]) -> float:
    """The row-label column's width in inches: room for the longest name."""
    return max(LABEL_W, CHAR_W * max(map(len, names), default=0) + 0.25)
def mosaic(cells: np.ndarray, gap: int, fill: float = 0.5) -> np.ndarray:
    """Tile cells (rows, cols, H, W, C) into one image with `gap`-pixel gaps of `fill`
    (mid grey, so white and black image borders both stay visible)."""
    r, c, h, w, ch = cells.shape
    out = np.full((r, h + gap, c, w + gap, ch), fill, np.float32)
    out[:, :h, :, :w] = cells.transpose(0, 2, 1, 3, 4)
    return out.reshape(r * (h + gap), c * (w + gap), ch)[:-gap, :-gap]


def save_grid(spec_text: str, out: str | Path, seed: int = 0) -> Path:
    """Draw the grid for a spec and write it atomically as PNG; returns the path.

    Up to 12 rows per block, blocks side by side; the severity of a corrupted
    spec is framed in red. Each block is one mosaic image in one axes, which
    keeps drawing fast however many cells there are.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    spec = parse_spec(spec_text)
    labels, cells, class_names = grid_rows(spec, seed)
    n_rows, n_cols, h, w, _ = cells.shape
    gap = max(1, round(max(h, w) / 14))
    blocks = -(-n_rows // MAX_ROWS_PER_BLOCK)
    per_block = -(-n_rows // blocks)
    row_names = labels if spec.corruption is None else class_names
    label_w = label_width(row_names)
    block_w = label_w + n_cols * CELL
    width = 2 * MARGIN + blocks * block_w
    title = textwrap.fill(f"{spec}: {describe_spec(spec)} (seed {seed})", int(width * 11))
    title_h = LINE_H * (title.count("\n") + 1) + 0.1
    height = 2 * MARGIN + title_h + HEAD_H + per_block * CELL
    fig = plt.figure(figsize=(width, height))
    titles = ["clean"] + [f"sev. {s}" for s in SEVERITIES]
    for b in range(blocks):
        part = cells[b * per_block:(b + 1) * per_block]
        rows = len(part)
        left = MARGIN + b * block_w + label_w
        ax = fig.add_axes((left / width, (height - MARGIN - title_h - HEAD_H - rows * CELL) / height,
                           n_cols * CELL / width, rows * CELL / height))
        img = mosaic(part, gap)
        ax.imshow(img[..., 0] if img.shape[-1] == 1 else img, cmap="gray", vmin=0, vmax=1,
                  interpolation="nearest", aspect="auto")
        ax.axis("off")
        for c in range(n_cols):
            ax.text(c * (w + gap) + w / 2, -3, titles[c], ha="center", va="bottom", fontsize=9)
        for r in range(rows):
            ax.text(-3, r * (h + gap) + h / 2, row_names[b * per_block + r], ha="right",
                    va="center", fontsize=9)
        if spec.corruption is not None:
            x0 = spec.severity * (w + gap) - 0.5 - gap / 2
            ax.add_patch(Rectangle((x0, -0.5 - gap / 2), w + gap, img.shape[0] + gap, fill=False,
                                   edgecolor="tab:red", linewidth=2.5, clip_on=False))
    fig.suptitle(title, fontsize=10, y=1 - MARGIN / height, va="top")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write_bytes(out, lambda f: f.write(buf.getvalue()))
    return Path(out)
