"""A subset of a sweep benchmark: `mcutrain bench NAME --only AXIS=VALUE ...`.

A sweep benchmark's axes are the `[grid]` of its sweep file (`bench/sweeps/NAME.toml`); `--only`
keeps some values of some axes (repeat it: values of one axis add up, axes narrow each other), so a
check of one corruption or one seed need not rerun the whole grid. A subset is not the benchmark's
result: it writes `NAME.subset.json` (never over the complete `NAME.json`), runs in its own sweep
folders (`...-subset`) and leaves the docs alone.
"""

from __future__ import annotations

from typing import Any

from mcutrain.errors import UserError

Only = dict[str, list[str]]
"""Axis -> the values kept, as the user spelled them (matched against the grid's values as text)."""

SUFFIX = "subset"
"""Of a subset's result file (`NAME.subset.json`) and sweep folders (`...-subset`)."""


def parse_only(items: list[str] | None) -> Only:
    """`["corruption=fog", "seed=0", "seed=1"]` -> `{"corruption": ["fog"], "seed": ["0", "1"]}`."""
    only: Only = {}
    for item in items or []:
        axis, sep, value = item.partition("=")
        if not sep or not axis.strip() or not value.strip():
            raise UserError(f"--only {item!r}: expected AXIS=VALUE, e.g. --only seed=0")
        values = only.setdefault(axis.strip(), [])
        if value.strip() not in values:
            values.append(value.strip())
    return only


def restrict(name: str, grid: dict[str, list[Any]], only: Only) -> dict[str, list[Any]]:
    """`grid` keeping only the values of `only`, in the grid's order; UserError for an axis or value
    the benchmark does not have, naming what it has."""
    for axis, values in only.items():
        if axis not in grid:
            raise UserError(f"benchmark '{name}' has no axis '{axis}'; its axes: {', '.join(grid)}")
        known = [str(v) for v in grid[axis]]
        unknown = [v for v in values if v not in known]
        if unknown:
            raise UserError(f"benchmark '{name}': {axis} {', '.join(unknown)} is not in its grid; "
                            f"the values of {axis}: {', '.join(known)}")
    return {axis: [v for v in vals if axis not in only or str(v) in only[axis]]
            for axis, vals in grid.items()}


def describe(only: Only) -> str:
    """`corruption=fog seed=0` (for logs)."""
    return " ".join(f"{axis}={','.join(values)}" for axis, values in only.items())
