"""What a training-state file may hold: per-array specs and the value checks every method uses.

The digest of a state file (`state_file`) only detects accidents; a crafted file with a valid
digest is stopped here, against the live method built for this model and configuration: the
same keys, dtypes and shapes, finite floats, and each method's own ranges (an int8 weight in
[-127, 127], an RNG state that is not 0, an EMA range with lo <= hi). Every check returns a list
of problems (empty when fine), so one message can name them all.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.methods.state_file import StateFileError


@dataclass(frozen=True)
class ArraySpec:
    """What one saved array must be: dtype, shape and the range of its values.

    Floats must always be finite. `lo`/`hi` bound every element (inclusive);
    `positive` requires > 0 (scales). Arrays of one `group` (e.g. the three
    statistics of a layer, created together at the first step) are present
    together or not at all; `required` arrays always exist.
    """

    dtype: np.dtype
    shape: tuple[int, ...]
    lo: float | None = None
    hi: float | None = None
    positive: bool = False
    required: bool = True
    group: str | None = None

    @classmethod
    def like(cls, a: np.ndarray, **kw: Any) -> ArraySpec:
        """The spec of an array as the live method holds it."""
        return cls(np.dtype(a.dtype), tuple(a.shape), **kw)


def check_arrays(arrays: Mapping[str, np.ndarray], specs: Mapping[str, ArraySpec]) -> list[str]:
    """Problems of `arrays` against `specs`: missing, unknown, dtype, shape, values (vectorized)."""
    problems: list[str] = []
    missing = sorted(k for k, s in specs.items() if s.required and k not in arrays)
    if missing:
        problems.append(f"lacks arrays {_names(missing)}")
    unknown = sorted(set(arrays) - set(specs))
    if unknown:
        problems.append(f"holds arrays this method does not keep: {_names(unknown)}")
    groups: dict[str, list[bool]] = {}
    for key, spec in specs.items():
        if spec.group is not None:
            groups.setdefault(spec.group, []).append(key in arrays)
    broken = sorted(g for g, present in groups.items() if any(present) and not all(present))
    if broken:
        problems.append(f"holds only part of the arrays of {_names(broken)}")
    for key in sorted(set(arrays) & set(specs)):
        problem = _array_problem(arrays[key], specs[key])
        if problem:
            problems.append(f"array '{key}' {problem}")
    return problems


def _array_problem(a: np.ndarray, s: ArraySpec) -> str | None:
    if a.dtype != s.dtype or a.shape != s.shape:
        return f"is {a.dtype} {a.shape}, this model and method need {s.dtype} {s.shape}"
    if a.size == 0:
        return None
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        return "holds NaN or infinite values"
    if a.dtype.kind in "fiu":
        if s.positive and not (a > 0).all():
            return f"must be > 0 (it holds {a.min()})"
        if s.lo is not None and a.min() < s.lo:
            return f"holds {a.min()}, below its least value {s.lo}"
        if s.hi is not None and a.max() > s.hi:
            return f"holds {a.max()}, above its greatest value {s.hi}"
    return None


def _names(keys: Iterable[str], limit: int = 6) -> str:
    keys = list(keys)
    shown = ", ".join(f"'{k}'" for k in keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def conform(got: Any, template: Any, where: str) -> list[str]:
    """Problems of a JSON value against the live method's own value of the same place.

    Objects need the same keys, lists the same length, leaves the same JSON
    type (bool, int, float, str, null); strings must be equal (formats such as
    a qparams dtype) and floats finite. Number lists are checked as arrays.
    """
    if isinstance(template, dict):
        if not isinstance(got, dict):
            return [f"{where} is a {kind_of(got)}, expected an object"]
        if set(got) != set(template):
            miss, extra = sorted(set(template) - set(got)), sorted(set(got) - set(template))
            parts = [f"lacks {_names(miss)}"] if miss else []
            parts += [f"has unknown {_names(extra)}"] if extra else []
            return [f"{where} " + "; ".join(parts)]
        return [p for k in template for p in conform(got[k], template[k], f"{where}.{k}")]
    if isinstance(template, list):
        if not isinstance(got, list) or len(got) != len(template):
            return [f"{where} is {kind_of(got)}, expected a list of {len(template)}"]
        if template and all(_is_number(v) for v in template):
            return number_list(got, where, kind=type(template[0]))
        return [p for i, (g, t) in enumerate(zip(got, template)) for p in conform(g, t, f"{where}[{i}]")]
    if kind_of(got) != kind_of(template):
        return [f"{where} is {kind_of(got)}, expected {kind_of(template)}"]
    if isinstance(template, str) and got != template:
        return [f"{where} is {got[:40]!r}, this model and method have {template!r}"]
    if isinstance(got, float) and not math.isfinite(got):
        return [f"{where} is {got}, not a finite number"]
    return []


def number_list(got: Any, where: str, kind: type = float) -> list[str]:
    """Problems of a JSON list of numbers of one kind (int or float, finite), checked vectorized."""
    if not isinstance(got, list) or not all(type(v) is kind for v in got):
        return [f"{where} is not a list of {kind.__name__} values"]
    if kind is float and got and not np.isfinite(np.asarray(got, np.float64)).all():
        return [f"{where} holds NaN or infinite values"]
    return []


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def kind_of(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a float"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return f"a list of {len(v)}"
    return "an object"


def int_in(v: Any, lo: int, hi: int, where: str) -> list[str]:
    """Problems of a JSON integer that must lie in [lo, hi]."""
    if not isinstance(v, int) or isinstance(v, bool):
        return [f"{where} is {kind_of(v)}, expected an integer"]
    if not lo <= v <= hi:
        return [f"{where} is {v}, outside [{lo}, {hi}]"]
    return []


def ema_range(d: Any, where: str) -> list[str]:
    """Problems of an EMA range entry {alpha, lo, hi}: alpha in (0, 1], lo <= hi, finite, same shape."""
    if not isinstance(d, dict) or set(d) != {"alpha", "lo", "hi"}:
        return [f"{where} is not an EMA range {{alpha, lo, hi}}"]
    problems = []
    a = d["alpha"]
    if not isinstance(a, float) or not 0.0 < a <= 1.0:
        problems.append(f"{where}.alpha is {a!r}, expected a float in (0, 1]")
    lo, hi = d["lo"], d["hi"]
    if (lo is None) != (hi is None):
        return [*problems, f"{where} has only one of lo and hi"]
    if lo is None:
        return problems
    for name, v in (("lo", lo), ("hi", hi)):
        if isinstance(v, list):
            problems += number_list(v, f"{where}.{name}")
        elif not isinstance(v, float) or not math.isfinite(v):
            problems.append(f"{where}.{name} is {v!r}, expected a finite float")
    if problems:
        return problems
    lo_a, hi_a = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    if lo_a.shape != hi_a.shape:
        return [f"{where}: lo and hi differ in length"]
    if not (lo_a <= hi_a).all():
        return [f"{where}: lo exceeds hi"]
    return []


QPARAM_ZERO_RANGE = {"int8": (-128, 127), "uint8": (0, 255)}


def qparams_entry(d: Any, where: str) -> list[str]:
    """Value problems of a qparams entry whose structure `conform` checked: scale > 0, zero point in range."""
    problems = []
    scale = np.asarray(d["scale"], np.float64)
    if not (np.isfinite(scale) & (scale > 0)).all():
        problems.append(f"{where}.scale must be finite and > 0")
    lo, hi = QPARAM_ZERO_RANGE.get(d["dtype"], (-(2**31), 2**31 - 1))
    zp = np.asarray(d["zero_point"], np.int64)
    if zp.size and not ((zp >= lo) & (zp <= hi)).all():
        problems.append(f"{where}.zero_point must lie in [{lo}, {hi}] for {d['dtype']}")
    return problems


def raise_problems(problems: list[str], path: str | Path, what: str = "training state") -> None:
    """One StateFileError listing the first problems, or nothing if there are none."""
    if problems:
        shown = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        raise StateFileError(f"'{path}' is not a valid {what} for this model and method: {shown}. "
                             "Resume with the model and settings that wrote it, or use an intact checkpoint")
