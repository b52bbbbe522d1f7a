"""Rounding modes against exact rational references (plain Python, element by element)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcutrain.quant.rng import XorShift32
from mcutrain.quant.rounding import (
    round_floor,
    round_half_away,
    round_mode,
    round_stochastic,
    stochastic_shift_right,
)

floats32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
floats64 = st.floats(allow_nan=False, allow_infinity=False)


def ref_half_away(x: float) -> float:
    f = Fraction(x)
    mag = math.floor(abs(f) + Fraction(1, 2))
    return float(mag if f >= 0 else -mag)


def test_ties_and_the_classic_trap() -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.49999997, 0.0, -0.0], np.float32)
    assert round_half_away(x).tolist() == [-3, -2, -1, 1, 2, 3, 0, 0, 0, 0]
    assert round_half_away(x).dtype == np.float32
    # floor(x + 0.5) gets this one wrong in float32; the exact rule must not
    assert float(np.floor(np.float32(0.49999997) + np.float32(0.5))) == 1.0


@settings(deadline=None)
@given(st.lists(floats32, min_size=1, max_size=50))
def test_half_away_float32_matches_exact(xs: list[float]) -> None:
    got = round_half_away(np.array(xs, np.float32)).tolist()
    assert got == [ref_half_away(x) for x in xs]


@settings(deadline=None)
@given(st.lists(floats64, min_size=1, max_size=50))
def test_half_away_float64_matches_exact(xs: list[float]) -> None:
    assert round_half_away(np.array(xs)).tolist() == [ref_half_away(x) for x in xs]


@settings(deadline=None)
@given(st.lists(floats32, min_size=1, max_size=50))
def test_floor_matches_exact(xs: list[float]) -> None:
    assert round_floor(np.array(xs, np.float32)).tolist() == [float(math.floor(Fraction(x))) for x in xs]


def test_stochastic_is_floor_of_x_plus_stream_fraction() -> None:
    x = np.array([[0.25, -0.25], [1.75, -3.5]], np.float32)
    got = round_stochastic(x, XorShift32(9))
    g = XorShift32(9)
    ref = []
    for v in x.reshape(-1).tolist():          # one draw per element, C order
        r = (g.next_u32() >> 8) * 2.0**-24
        ref.append(float(np.floor(np.float32(v) + np.float32(r))))
    assert got.reshape(-1).tolist() == ref
    assert got.dtype == np.float32


def test_stochastic_is_unbiased_on_average() -> None:
    x = np.full(200_000, 0.3, np.float32)
    mean = round_stochastic(x, XorShift32(1)).mean()
    assert abs(mean - 0.3) < 0.005
    assert set(np.unique(round_stochastic(x, XorShift32(2))).tolist()) == {0.0, 1.0}


@settings(deadline=None)
@given(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=40), st.integers(0, 24),
       st.integers(0, 2**32 - 1))
def test_stochastic_shift_right_matches_loop(xs: list[int], n: int, seed: int) -> None:
    got = stochastic_shift_right(np.array(xs, np.int64), n, XorShift32(seed)).tolist()
    g = XorShift32(seed)
    ref = [x if n == 0 else (x + (g.next_u32() >> (32 - n))) >> n for x in xs]
    assert got == ref


def test_mode_dispatch_and_errors() -> None:
    x = np.array([1.5, -1.5], np.float32)
    assert round_mode(x, "nearest").tolist() == [2, -2]
    assert round_mode(x, "floor").tolist() == [1, -2]
    with pytest.raises(ValueError, match="needs a random generator"):
        round_mode(x, "stochastic")
    with pytest.raises(ValueError, match="unknown rounding mode"):
        round_mode(x, "banker")
