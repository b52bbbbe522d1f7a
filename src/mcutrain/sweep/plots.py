"""The pictures and files of `mcutrain report SWEEP_DIR`: accuracy per cell, a heatmap, the table.

`accuracy.png` has one bar per cell in the sweep file's order, grouped by configuration (the bars
of one configuration's seeds side by side, the mean as a line across them); `heatmap.png` the mean
test accuracy over two chosen axes (`--heatmap AXIS1,AXIS2`: rows, columns), every other axis and
the seeds averaged, each square labelled with its value. Every file is written atomically.
"""

from __future__ import annotations

import io as _io
import json
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.errors import UserError
from mcutrain.io import atomic_write_bytes, json_plain
from mcutrain.sweep.table import SweepResults, accuracy, cells, group_axes, read_results, report_text, rows


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: Path) -> Path:
    buf = _io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    _pyplot().close(fig)
    atomic_write_bytes(path, lambda f: f.write(buf.getvalue()))
    return path


def config_label(axes: tuple[str, ...], values: dict[str, Any]) -> str:
    return "\n".join(f"{a}={values.get(a)}" for a in axes)


def plot_cells(res: SweepResults, path: Path) -> Path:
    """One bar per finished cell (test accuracy), grouped by configuration, the group's mean as a line."""
    plt = _pyplot()
    axes = group_axes(res)
    table = rows(res)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.8 * len(table) + 1.5), 4.4))
    for i, row in enumerate(table):
        mine = [ln for ln in res.done if all(str(ln["axes"].get(a, "")) == row[a] for a in axes)]
        xs = i + (np.arange(len(mine)) - (len(mine) - 1) / 2) * (0.8 / max(len(mine), 1))
        ax.bar(xs, [accuracy(ln) for ln in mine], width=0.8 / max(len(mine), 1), color=f"C{i % 10}",
               edgecolor="white")
        if mine:
            ax.hlines(row["accuracy"], i - 0.42, i + 0.42, colors="black", linewidth=1)
    ax.set_xticks(range(len(table)), [config_label(axes, r) for r in table], fontsize=7)
    ax.set(ylabel="test accuracy", ylim=(0, 1), title=f"sweep {res.name}: accuracy per cell "
                                                      "(bars: seeds; line: mean)")
    fig.tight_layout()
    return _save(fig, path)


def heatmap_axes(res: SweepResults, text: str) -> tuple[str, str]:
    """`--heatmap AXIS1,AXIS2` checked against the sweep's axes."""
    names = tuple(a.strip() for a in text.split(","))
    have = sorted({a for ln in res.lines for a in ln["axes"]})
    if len(names) != 2 or names[0] == names[1] or any(n not in have for n in names):
        raise UserError(f"--heatmap '{text}': give two different axes of the sweep as AXIS1,AXIS2; "
                        f"its axes: {', '.join(have)}")
    return names[0], names[1]


def plot_heatmap(res: SweepResults, pair: tuple[str, str], path: Path) -> Path:
    """Mean test accuracy over two axes (rows, columns), the other axes and the seeds averaged."""
    plt = _pyplot()
    a, b = pair
    order = lambda axis: list(dict.fromkeys(str(ln["axes"].get(axis)) for ln in res.lines))
    ra, cb = order(a), order(b)
    acc = np.full((len(ra), len(cb)), np.nan)
    for i, va in enumerate(ra):
        for j, vb in enumerate(cb):
            vals = [accuracy(ln) for ln in res.done
                    if str(ln["axes"].get(a)) == va and str(ln["axes"].get(b)) == vb]
            acc[i, j] = np.mean(vals) if vals else np.nan
    fig, ax = plt.subplots(figsize=(1.6 * len(cb) + 2.5, 0.9 * len(ra) + 1.8))
    im = ax.imshow(acc, vmin=0, vmax=1, cmap="viridis")
    for i, j in np.ndindex(acc.shape):
        text = "—" if np.isnan(acc[i, j]) else f"{acc[i, j]:.3f}"
        ax.text(j, i, text, ha="center", va="center", color="white" if acc[i, j] < 0.6 else "black")
    ax.set_xticks(range(len(cb)), cb)
    ax.set_yticks(range(len(ra)), ra)
    ax.set(xlabel=b, ylabel=a, title=f"sweep {res.name}: mean test accuracy")
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    return _save(fig, path)


def write_sweep_report(sweep_dir: str | Path, out_dir: str | Path | None = None,
                       heatmap: str | None = None) -> dict[str, Any]:
    """The table and plots of a sweep folder into `out_dir` (default SWEEP_DIR/report); the JSON result."""
    res = read_results(sweep_dir)
    pair = heatmap_axes(res, heatmap) if heatmap else None
    out = Path(out_dir) if out_dir is not None else Path(sweep_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    table = report_text(res)
    doc = {"sweep_dir": str(sweep_dir), "sweep": res.name, "rows": rows(res), "cells": cells(res)}
    files = [plot_cells(res, out / "accuracy.png")] if res.done else []
    if pair:
        files.append(plot_heatmap(res, pair, out / "heatmap.png"))
    atomic_write_bytes(out / "sweep.md", lambda f: f.write((table + "\n").encode()))
    text = json.dumps(doc, indent=2, default=json_plain).encode()
    atomic_write_bytes(out / "sweep.json", lambda f: f.write(text))
    return {**doc, "table": table, "files": [str(p) for p in (*files, out / "sweep.md", out / "sweep.json")]}
