"""Fixed-point requantization against exact rational references in plain Python ints."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcutrain.quant import fixedpoint as F
from mcutrain.quant.fixedpoint import (
    activation_range,
    add_multipliers,
    output_multiplier,
    quantize_multiplier,
    requantize,
    requantize_output,
    rounding_divide,
    rounding_shift_right,
)
from mcutrain.quant.qparams import QParams, qparams_from_range

int32s = st.integers(-(2**31), 2**31 - 1)
pos_floats = st.floats(min_value=2.0**-40, max_value=2.0**29.99, allow_nan=False, allow_infinity=False)


def ref_round(f: Fraction) -> int:
    mag = math.floor(abs(f) + Fraction(1, 2))
    return mag if f >= 0 else -mag


def test_hand_values() -> None:
    m, s = quantize_multiplier(0.75)
    assert (int(m), int(s)) == (3 << 29, 0)
    assert requantize(np.array([3, -3, 2, -2, 1, 0]), m, s).tolist() == [2, -2, 2, -2, 1, 0]
    m, s = quantize_multiplier(0.5)
    assert (int(m), int(s)) == (1 << 30, 0)
    assert requantize(np.array([1, -1, 3, -3]), m, s).tolist() == [1, -1, 2, -2]   # ties away from 0
    m, s = quantize_multiplier(2.0**-10)
    assert (int(m), int(s)) == (1 << 30, -9)
    assert quantize_multiplier(0.0) == (0, 0)


@settings(deadline=None)
@given(pos_floats)
def test_quantize_multiplier_is_the_nearest_31_bit_mantissa(m: float) -> None:
    q, s = quantize_multiplier(m)
    q, s = int(q), int(s)
    if m < 2.0**-32:
        assert (q, s) == (0, 0)
        return
    assert 2**30 <= q < 2**31 and 1 <= 31 - s <= 62
    exact = Fraction(m) * 2 ** (31 - s)            # m in units of the multiplier's LSB
    assert abs(Fraction(q) - exact) <= Fraction(1, 2)


@settings(deadline=None)
@given(st.floats(width=32, min_value=2.0**-31, max_value=2.0**29, allow_nan=False))
def test_float32_multipliers_are_exact(m: float) -> None:
    q, s = quantize_multiplier(m)
    assert Fraction(int(q)) * Fraction(2) ** (int(s) - 31) == Fraction(m)


def test_multiplier_limits() -> None:
    with pytest.raises(ValueError, match="cannot be requantized"):
        quantize_multiplier(2.0**30)
    with pytest.raises(ValueError, match="finite and >= 0"):
        quantize_multiplier(-1.0)
    with pytest.raises(ValueError, match="finite and >= 0"):
        quantize_multiplier(float("nan"))
    q, s = quantize_multiplier(np.array([2.0**30 * 0.999, 2.0**-32, 2.0**-32 * 0.999]))
    assert q.tolist() == [round(0.999 * 2**31), 2**30, 0]
    assert s.tolist() == [30, -31, 0]


EDGE_MULTIPLIERS = [0.0, 2.0**-33, 2.0**-32, 2.0**-32 * 0.999, 1 - 2.0**-33, 0.5, 2.0**29,
                    2.0**30 * 0.999, 5e-324, float(np.float32(0.3)) * float(np.float32(0.7)) / 0.9]
"""Zero, the flush-to-zero edge, a mantissa that rounds up to 2^31 (the carry), the largest
accepted, a subnormal: where the scalar and the per-channel forms could part."""


def test_one_multiplier_and_an_array_of_them_agree() -> None:
    q, s = quantize_multiplier(np.array(EDGE_MULTIPLIERS))
    for i, m in enumerate(EDGE_MULTIPLIERS):
        qi, si = quantize_multiplier(m)
        assert qi.shape == () and qi.dtype == np.int32 and si.dtype == np.int32
        assert (int(qi), int(si)) == (int(q[i]), int(s[i])), m
    for bad in (-1.0, float("nan"), float("inf"), 2.0**30):
        for arg in (bad, np.array([0.5, bad])):
            with pytest.raises(ValueError, match=r"cannot be requantized|finite and >= 0"):
                quantize_multiplier(arg)


@settings(deadline=None)
@given(st.lists(int32s, min_size=1, max_size=30), pos_floats)
def test_requantize_matches_exact_rounding(acc: list[int], m: float) -> None:
    q, s = quantize_multiplier(m)
    got = requantize(np.array(acc, np.int64), q, s).tolist()
    ref = [ref_round(Fraction(a * int(q), 2 ** (31 - int(s)))) for a in acc]
    assert got == ref


def test_requantize_extremes() -> None:
    acc = np.array([-(2**31), 2**31 - 1, 0, 1, -1])
    q, s = np.int32(2**31 - 1), np.int32(30)           # largest representable M (just under 2^30)
    ref = [ref_round(Fraction(a * (2**31 - 1), 2)) for a in acc.tolist()]
    assert requantize(acc, q, s).tolist() == ref
    q, s = np.int32(2**30), np.int32(-31)               # smallest: M = 2^-32, n = 62
    # -2^31 * 2^-32 = -0.5 exactly: the one tie at the bottom of the range rounds away from 0
    assert requantize(acc, q, s).tolist() == [-1, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="int32 range"):
        requantize(np.array([2**31]), q, s)
    with pytest.raises(ValueError, match="right shift"):
        requantize(np.array([1]), 2**30, 31)
    with pytest.raises(TypeError):
        requantize(np.array([1.0]), 2**30, 0)


def test_requantize_per_channel_on_last_axis() -> None:
    q, s = quantize_multiplier(np.array([0.5, 0.25, 1.0]))
    acc = np.array([[[4, 4, 4], [-3, -3, -3]]])          # (1, 2, 3): NHWC channels last
    assert requantize(acc, q, s).tolist() == [[[2, 1, 4], [-2, -1, -3]]]


@settings(deadline=None)
@given(st.lists(int32s, min_size=1, max_size=30), pos_floats, st.integers(-128, 127),
       st.sampled_from(["none", "relu", "relu6"]))
def test_requantize_output_matches_loop(acc: list[int], m: float, z: int, act: str) -> None:
    q, s = quantize_multiplier(min(m, 100.0))
    qp = QParams(np.float32(0.05), z)
    lo, hi = activation_range(qp, act)
    got = requantize_output(np.array(acc), q, s, z, lo, hi)
    assert got.dtype == np.int8
    ref = [min(max(ref_round(Fraction(a * int(q), 2 ** (31 - int(s)))) + z, lo), hi) for a in acc]
    assert got.tolist() == ref


@settings(deadline=None)
@given(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=30), st.integers(1, 2**20))
def test_rounding_divide_matches_exact(num: list[int], den: int) -> None:
    assert rounding_divide(np.array(num), den).tolist() == [ref_round(Fraction(n, den)) for n in num]


@settings(deadline=None)
@given(st.lists(st.integers(-(2**50), 2**50), min_size=1, max_size=30), st.integers(1, 62))
def test_rounding_shift_right_matches_exact(xs: list[int], n: int) -> None:
    assert rounding_shift_right(np.array(xs), n).tolist() == [ref_round(Fraction(x, 2**n)) for x in xs]


def test_rounding_divide_refuses_bad_divisors() -> None:
    with pytest.raises(ValueError, match="> 0"):
        rounding_divide(np.array([1]), 0)
    assert rounding_divide(np.array([-7, -6, -5, 5, 6, 7]), 4).tolist() == [-2, -2, -1, 1, 2, 2]


def test_activation_ranges() -> None:
    # s = float32(12/255) is a hair above 12/255, so -128 - (-2/s) = -85.50000x rounds to -86,
    # and 6/s = 127.4999x rounds to 127
    qp = qparams_from_range(-2.0, 10.0)
    assert int(qp.zero_point) == -86
    assert activation_range(qp, "none") == (-128, 127)
    assert activation_range(qp, "relu") == (-86, 127)
    assert activation_range(qp, "relu6") == (-86, -86 + 127)
    big = qparams_from_range(0.0, 3.0)             # relu6 bound above the int8 range: clamped to 127
    assert activation_range(big, "relu6") == (-128, 127)
    assert activation_range(QParams(np.float32(1.0), 0, "uint8"), "relu") == (0, 255)
    with pytest.raises(ValueError, match="unknown activation"):
        activation_range(qp, "gelu")


def test_output_multiplier_uses_the_float64_product() -> None:
    sx, sw, sy = np.float32(0.02), np.array([0.003, 0.0007], np.float32), np.float32(0.05)
    q, s = output_multiplier(sx, sw, sy)
    ref = quantize_multiplier(np.float64(sx) * sw.astype(np.float64) / np.float64(sy))
    assert q.tolist() == ref[0].tolist() and s.tolist() == ref[1].tolist()


@settings(deadline=None)
@given(pos_floats, pos_floats, pos_floats)
def test_add_multipliers_share_one_shift(sa: float, sb: float, sy: float) -> None:
    sa, sb, sy = (float(np.float32(v)) for v in (sa, sb, sy))
    ra = np.float64(sa) / np.float64(sy)
    rb = np.float64(sb) / np.float64(sy)
    if max(ra, rb) >= 2**30 - 0.25:                 # 2r rounds to 2^31: no shift n >= 1 fits
        with pytest.raises(ValueError, match="cannot be requantized"):
            add_multipliers(sa, sb, sy)
        return
    ma, mb, n = add_multipliers(sa, sb, sy)
    assert 1 <= n <= 62 and 0 <= ma < 2**31 and 0 <= mb < 2**31
    assert abs(Fraction(ma, 2**n) - Fraction(ra)) <= Fraction(1, 2**(n + 1))
    assert abs(Fraction(mb, 2**n) - Fraction(rb)) <= Fraction(1, 2**(n + 1))
    if n < 62:
        assert max(ma, mb) >= 2**29                   # the shift is as large as int32 allows


def test_add_multiplier_hand_values() -> None:
    assert add_multipliers(0.1, 0.05, 0.2) == (2**30, 2**29, 31)
    assert add_multipliers(0.5, 0.25, 0.5) == (2**30, 2**29, 30)


# ---------------------------------------------------------------- the bounded (float64) form


def _requant_ref(acc, mult, shift, z, lo, hi, bias=None):
    a = np.asarray(acc).astype(np.int64) + (0 if bias is None else np.asarray(bias, np.int64))
    return F.requantize_output(a, mult, shift, z, lo, hi)


@pytest.mark.parametrize("acc_dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("z,lo,hi", [(-7, -7, 127), (-128, -128, 127), (12, -128, 127), (0, -127, 127),
                                     (-20, -20, 40)])
def test_bounded_requantize_output_equals_the_int64_rule(acc_dtype, z, lo, hi, monkeypatch):
    """Each tier (bias fused, bias added first, lean int64) on ties, signs and per-channel shifts."""
    rng = np.random.default_rng(4)
    acc = rng.integers(-2**19, 2**19, (300, 6))
    acc[:8] = [[256 * k + 128] * 6 for k in range(-4, 4)]          # exact ties for the 2^-8 channel
    acc[8] = 0
    small_bias = rng.integers(-2**20, 2**20, 6)
    tiers = (((2.0**-8, 0.75 * 2.0**-5, 2.0**-14, 0.3, 1e-3, 0.5), (None, small_bias)),
             ((2.0**-8, 0.3, 2.0**-30, 1e-3, 1e-7, 0.5), (small_bias,)),      # n = 61: bias added first
             ((2.0**-8, 0.3, 2.0**-14, 1e-3, 1e-7, 0.5), (np.full(6, 2**30),)))  # beyond 2^52: int64
    for reals, biases in tiers:
        mult, shift = F.quantize_multiplier(np.array(reals))
        for bias in biases:
            want = _requant_ref(acc, mult, shift, z, lo, hi, bias)
            monkeypatch.setattr(F, "requantize", None)     # only for accumulators outside int32
            amax = int(np.abs(acc + (0 if bias is None else bias)).max())
            got = F.requantize_output(acc.astype(acc_dtype), mult, shift, z, lo, hi, np.int8, bias=bias,
                                         acc_max=amax)
            monkeypatch.undo()
            assert got.dtype == np.int8 and np.array_equal(got, want)
    # float32 ratios (24-bit multipliers) with large accumulators, as the int8 error requantization has
    m32 = np.array([2.0**-20 * 3, 1.2345e-5, 3.0e-7], np.float32)    # a tie is exact for 3 * 2^-20
    mult3, shift3 = F.quantize_multiplier(m32.astype(np.float64))
    acc3 = rng.integers(-2**26, 2**26, (200, 3))
    acc3[:4, 0] = np.array([1, 3, -1, -5]) * 2**19 // 3 * 1                    # v = k/2 * ... near ties
    acc3[4:8, 0] = np.array([2**19, 3 * 2**19, -(2**19), -5 * 2**19]) // 3
    want = _requant_ref(acc3, mult3, shift3, 0, -127, 127)
    got = F.requantize_output(acc3.astype(np.float64), mult3, shift3, 0, -127, 127, np.int16,
                              acc_max=int(np.abs(acc3).max()))
    assert np.array_equal(got, want)
    # an int32 overflow is still refused
    with pytest.raises(ValueError, match="int32"):
        F.requantize_output(np.array([[2**32, 0, 0, 0, 0, 0]]), mult, shift, z, lo, hi, acc_max=2**32)


def test_bounded_requantize_output_hand_checked():
    # M = 0.5: 3 * 0.5 = 1.5 -> 2, -3 * 0.5 = -1.5 -> -2 (half away from zero), then + z and the clamp
    m, s = np.int32(2**30), np.int32(0)
    acc = np.array([3.0, -3.0, 1.0, 400.0])
    assert F.requantize_output(acc, m, s, 1, -128, 127, acc_max=400).tolist() == [3, -1, 2, 127]
    assert F.requantize_output(acc, m, s, 1, 1, 127, acc_max=400).tolist() == [3, 1, 2, 127]      # relu clamp
    assert F.requantize_output(np.array([3, -3]), m, s, 0, -127, 127, np.int32, acc_max=3).dtype == np.int32


@pytest.mark.parametrize("rounding", ["single", "tflite"])
@pytest.mark.parametrize("z,lo,hi", [(-128, -128, 127), (127, -128, 127), (-5, -5, 127), (3, -128, 127)])
def test_requantize_products_equals_the_int64_rule_at_the_extremes(rounding, z, lo, hi):
    """Accumulators at +-bound with the largest biases int32 allows, float32 ratios (the float64
    form) and full 31-bit multipliers (past 2^52: the int64 fallback), ties included."""
    bound = 1 << 24                                                   # float32's exact limit
    acc = np.array([[bound, -bound, 0, 1, -1, bound - 1, 128, -128, 2**23 + 1, -(2**23) - 1]] * 4,
                   np.float32).T                                      # (10, 4): 4 channels
    reals = (np.array([2.0**-8, 0.75 * 2.0**-5, 1.2345e-5, 2.0**-30], np.float32).astype(np.float64),
             np.array([0.3, 1 / 3, 0.7 * 2.0**-20, 0.999999]))        # 31 significant bits
    biases = (np.zeros(4, np.int32), np.array([2**31 - 1 - bound, -(2**31) + 1 + bound, 77, -77]),
              np.array([128, -128, 2**20, -(2**20)]))
    for real in reals:
        mult, shift = F.quantize_multiplier(real)
        for bias in biases:
            got = F.requantize_products(acc, bias, bound, mult, shift, z, lo, hi, rounding)
            want = F.requantize_output(acc.astype(np.int64) + bias, mult, shift, z, lo, hi,
                                       rounding=rounding)
            assert got.dtype == np.int8 and np.array_equal(got, want)
            assert np.array_equal(got, F.requantize_products(acc.astype(np.int64), bias, bound, mult,
                                                             shift, z, lo, hi, rounding))


@pytest.mark.parametrize("dtype, z, lo, hi", [(np.uint8, 128, 0, 255), (np.uint8, 0, 0, 255),
                                              (np.int16, 5, -32767, 32767), (np.int16, 0, -300, 300),
                                              (np.int32, -9, -100000, 100000), (np.int8, 127, -128, 127)])
def test_bounded_requantize_output_in_every_output_dtype_equals_the_int64_rule(dtype, z, lo, hi):
    """The float64 form's clamp-then-truncate, with the zero point added to the integers after."""
    rng = np.random.default_rng(11)
    acc = rng.integers(-2**22, 2**22, (500, 3))
    acc[:6, 0] = np.array([1, 3, -1, -3, 5, -5]) * 2**7          # ties for the 2^-8 channel
    mult, shift = F.quantize_multiplier(np.array([2.0**-8, 1e-4, 0.0123]))
    bias = np.array([0, -77, 2**20])
    want = np.clip(F.requantize(acc + bias, mult, shift) + z, lo, hi)
    got = F.requantize_output(acc.astype(np.float64), mult, shift, z, lo, hi, dtype, bias=bias,
                              acc_max=int(np.abs(acc + bias).max()))
    assert got.dtype == dtype and np.array_equal(got.astype(np.int64), want)
