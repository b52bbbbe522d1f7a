"""Rounding modes of float-to-integer conversions: nearest, floor, stochastic.

Every place where mcutrain turns a real value into an integer names one of
these modes, so the golden model and the C runtime agree on the last bit.
All three take a float array and return a float array of the same dtype
holding integral values; the caller casts (after clamping) to its integer type.

- ``nearest``: round half away from zero (C99 ``roundf``/``round``), computed
  exactly (no ``floor(x + 0.5)``, which is wrong for 0.49999997f).
- ``floor``: toward minus infinity (seed A's quantizer).
- ``stochastic``: ``floor(x + r)`` with ``r`` uniform in [0, 1) drawn from the
  xorshift32 stream (``XorShift32.uniform01``), one draw per element in
  C (row-major) order; the addition is done in the dtype of ``x`` (float32 on
  the device). Unbiased up to the float rounding of ``x + r``.

Example:
    >>> round_half_away(np.array([-2.5, -0.5, 0.5, 1.5], np.float32)).tolist()
    [-3.0, -1.0, 1.0, 2.0]
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

ROUNDING_MODES = ("nearest", "floor", "stochastic")


class UniformSource(Protocol):
    """What stochastic rounding needs from a generator (``XorShift32`` has it)."""

    def uniform01(self, n: int) -> np.ndarray: ...


def _as_float(x: np.ndarray | float) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    return arr


def round_half_away(x: np.ndarray | float) -> np.ndarray:
    """Round to nearest, ties away from zero, exactly (the C99 ``round`` rule).

    NOTE: ``x - trunc(x)`` is exact in IEEE arithmetic, so comparing it with
    0.5 decides ties without the double rounding of ``floor(x + 0.5)``.
    """
    arr = _as_float(x)
    t = np.trunc(arr)
    with np.errstate(invalid="ignore"):      # inf - inf: NaN compares False, inf stays inf
        frac = arr - t
    return t + np.sign(arr) * (np.abs(frac) >= 0.5).astype(arr.dtype)


def round_floor(x: np.ndarray | float) -> np.ndarray:
    """Round toward minus infinity."""
    return np.floor(_as_float(x))


def round_stochastic(x: np.ndarray | float, rng: UniformSource) -> np.ndarray:
    """``floor(x + r)``, r uniform in [0, 1) from ``rng``, one draw per element (C order).

    The sum is computed in the dtype of ``x``; ``r`` (a 24-bit fraction) is
    exact in float32 and float64 alike.
    """
    arr = _as_float(x)
    r = rng.uniform01(arr.size).astype(arr.dtype).reshape(arr.shape)
    return np.floor(arr + r)


def round_mode(x: np.ndarray | float, mode: str, rng: UniformSource | None = None) -> np.ndarray:
    """Dispatch on a rounding mode name (one of ``ROUNDING_MODES``)."""
    if mode == "nearest":
        return round_half_away(x)
    if mode == "floor":
        return round_floor(x)
    if mode == "stochastic":
        if rng is None:
            raise ValueError("stochastic rounding needs a random generator: pass rng=XorShift32(seed)")
        return round_stochastic(x, rng)
    raise ValueError(f"unknown rounding mode {mode!r}; use one of {', '.join(ROUNDING_MODES)}")


def stochastic_shift_right(x: np.ndarray, n: int, rng: UniformSource) -> np.ndarray:
    """Integer stochastic rounding of ``x / 2^n`` (0 <= n <= 24): ``(x + (u >> (32 - n))) >> n``.

    The integer twin of ``round_stochastic`` for fixed-point values: ``u`` is
    the raw 32-bit draw, so the added fraction is uniform over the ``2^n``
    residues and the result is exactly unbiased. ``>>`` is an arithmetic
    shift (floor), as on Cortex-M. One draw per element in C order.
    """
    if not 0 <= n <= 24:
        raise ValueError(f"shift n={n} out of range [0, 24]")
    arr = np.asarray(x, dtype=np.int64)
    if n == 0:
        return arr.copy()
    draw = getattr(rng, "draw_u32", None)
    if draw is None:
        raise ValueError("stochastic_shift_right needs a generator with draw_u32 (XorShift32)")
    u = draw(arr.size).astype(np.int64).reshape(arr.shape)
    return (arr + (u >> (32 - n))) >> n
