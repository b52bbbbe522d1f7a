"""The table of a sweep folder: accuracy per cell, and mean +- std over seeds per configuration.

Cells are read in the order of the sweep file (its manifest), whatever order they finished in.
A row groups the cells that differ only in `seed`; its `accuracy` is the mean of their test
accuracies (`mcutrain.api.evaluate` on the test split), `accuracy_std` the sample standard deviation
(ddof 1; 0 for one seed), `seeds` how many finished, `failed` how many failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.errors import UserError
from mcutrain.sweep import store

SEED = "seed"


@dataclass(frozen=True)
class SweepResults:
    """A sweep folder read back: its name, axes (file order) and result lines (file order)."""

    name: str
    axes: tuple[str, ...]
    lines: tuple[dict[str, Any], ...]

    @property
    def done(self) -> list[dict[str, Any]]:
        return [ln for ln in self.lines if ln["status"] == "done"]


def read_results(sweep_dir: str | Path) -> SweepResults:
    """The finished cells of a sweep folder, in the sweep file's order."""
    if not store.is_sweep_dir(sweep_dir):
        raise UserError(f"'{sweep_dir}' holds no {store.RESULTS}; give the folder of 'mcutrain sweep -o'")
    manifest = store.read_manifest(sweep_dir)
    lines = store.latest(sweep_dir)
    keys = [k for k in manifest.get("cells", list(lines)) if k in lines]
    axes = manifest.get("axes") or sorted({a for ln in lines.values() for a in ln.get("axes", {})})
    name = manifest.get("name", Path(sweep_dir).name)
    return SweepResults(name, tuple(axes), tuple(lines[k] for k in keys))


def accuracy(line: dict[str, Any]) -> float:
    return float(line["eval"]["accuracy"])


def group_axes(res: SweepResults) -> tuple[str, ...]:
    """The axes a row is keyed by: every axis but the seed (listed cells: every key they set)."""
    axes = list(res.axes) or sorted({a for ln in res.lines for a in ln["axes"]})
    return tuple(a for a in axes if a != SEED)


def rows(res: SweepResults) -> list[dict[str, Any]]:
    """One row per configuration (the cells that differ only in seed), in the sweep file's order."""
    axes = group_axes(res)
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for ln in res.lines:
        groups.setdefault(tuple(str(ln["axes"].get(a, "")) for a in axes), []).append(ln)
    out = []
    for key, lines in groups.items():
        accs = np.asarray([accuracy(ln) for ln in lines if ln["status"] == "done"], np.float64)
        out.append({**dict(zip(axes, key)),
                    "accuracy": float(accs.mean()) if len(accs) else None,
                    "accuracy_std": float(accs.std(ddof=1)) if len(accs) > 1 else 0.0 if len(accs) else None,
                    "seeds": len(accs), "failed": len(lines) - len(accs)})
    return out


def cells(res: SweepResults) -> list[dict[str, Any]]:
    """One entry per cell: its axes, status, test accuracy (None when it failed) and error."""
    return [{"key": ln["key"], **{a: ln["axes"].get(a) for a in res.axes or ln["axes"]},
             "status": ln["status"], "accuracy": accuracy(ln) if ln["status"] == "done" else None,
             **({"error": f"{ln['error']['type']}: {ln['error']['message']}"} if "error" in ln else {})}
            for ln in res.lines]


def markdown(table: list[dict[str, Any]], columns: list[str]) -> str:
    """A GitHub table; accuracies with 4 decimals, a missing value as a dash."""
    def cell(v: Any, c: str) -> str:
        if v is None:
            return "—"
        return f"{v:.4f}" if c.startswith("accuracy") and isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(cell(r.get(c), c) for c in columns) + " |" for r in table])


def report_text(res: SweepResults) -> str:
    """The table of `mcutrain report SWEEP_DIR`: the grouped rows, then the failed cells' errors."""
    table = rows(res)
    text = markdown(table, [*group_axes(res), "accuracy", "accuracy_std", "seeds", "failed"])
    failed = [c for c in cells(res) if c["status"] == "failed"]
    if failed:
        text += "\n\nfailed cells:\n" + "\n".join(
            f"- {' '.join(f'{a}={c[a]}' for a in res.axes if a in c)}: {c['error']}" for c in failed)
    return text
