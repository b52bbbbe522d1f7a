"""Quantization parameters: formulas at the extremes, and quantize/dequantize against scalar loops."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcutrain.quant.qparams import (
    DEGENERATE_SCALE,
    MIN_SCALE,
    ZERO_CHANNEL_SCALE,
    EmaRange,
    QParams,
    per_channel_symmetric,
    qparams_from_range,
    quantize_bias,
)
from mcutrain.quant.rng import XorShift32

F32 = np.float32
BIG = 2.0**100
finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-BIG, max_value=BIG)


def ref_round(f: Fraction, mode: str) -> int:
    if mode == "floor":
        return math.floor(f)
    mag = math.floor(abs(f) + Fraction(1, 2))
    return mag if f >= 0 else -mag


def ref_quantize(x: list[float], scale: float, zp: int, lo: int, hi: int, mode: str) -> list[int]:
    out = []
    for v in x:                                          # scalar float32 division, then exact rounding
        with np.errstate(over="ignore"):
            quotient = float(F32(v) / F32(scale))
        if math.isinf(quotient):                         # float32 overflow saturates
            out.append(hi if quotient > 0 else lo)
            continue
        out.append(min(max(ref_round(Fraction(quotient), mode) + zp, lo), hi))
    return out


def test_int8_asymmetric_hand_values() -> None:
    qp = qparams_from_range(-1.0, 3.0)
    assert qp.scale == F32(4.0) / F32(255) and int(qp.zero_point) == -64
    assert qp.quantize(np.array([0.0, 3.0, -1.0, 100.0, -100.0], F32)).tolist() == [-64, 127, -128, 127, -128]
    assert qp.quantize(np.array([0.0], F32)).dtype == np.int8


def test_range_is_widened_to_contain_zero() -> None:
    pos = qparams_from_range(2.0, 4.0)               # [2, 4] -> [0, 4]
    assert pos.scale == F32(4.0) / F32(255) and int(pos.zero_point) == -128
    neg = qparams_from_range(-4.0, -2.0)             # [-4, -2] -> [-4, 0]
    assert neg.scale == F32(4.0) / F32(255) and int(neg.zero_point) == 127
    for qp in (pos, neg, qparams_from_range(-0.3, 7.7), qparams_from_range(-1e-20, 1e-20)):
        z = qp.quantize(np.array([0.0], F32))
        assert qp.dequantize(z).tolist() == [0.0]    # real 0 is exact


def test_degenerate_and_tiny_ranges() -> None:
    qp = qparams_from_range(0.0, 0.0)
    assert qp.scale == DEGENERATE_SCALE and int(qp.zero_point) == -128
    assert qp.quantize(np.array([0.0, 0.7], F32)).tolist() == [-128, -127]
    tiny = qparams_from_range(0.0, 1e-44)            # (max - min) / 255 underflows
    assert tiny.scale == MIN_SCALE
    sym = qparams_from_range(0.0, 0.0, symmetric=True)
    assert sym.scale == ZERO_CHANNEL_SCALE and int(sym.zero_point) == 0


def test_huge_ranges() -> None:
    qp = qparams_from_range(-1e38, 1e38)
    assert qp.scale == (F32(1e38) - F32(-1e38)) / F32(255)
    # z = round_half_away(-128 + 127.5) = -1 keeps real 0 exact; the top end lands one step short
    assert int(qp.zero_point) == -1
    assert qp.quantize(np.array([1e38, -1e38, 0.0], F32)).tolist() == [126, -128, -1]
    with pytest.raises(ValueError, match="wider than float32"):
        qparams_from_range(-3e38, 3e38)
    with pytest.raises(ValueError, match="finite"):
        qparams_from_range(float("-inf"), 1.0)


def test_uint8_is_seed_a_format() -> None:
    qp = qparams_from_range(-1.0, 3.0, dtype="uint8")
    s = F32(4.0) / F32(255)
    assert qp.scale == s and int(qp.zero_point) == math.floor(float(F32(1.0) / s))   # floor(-min/s) = 63
    x = np.array([-1.0, 0.0, 0.01, 2.999, 3.0, 9.0], F32)
    q = qp.quantize(x, rounding="floor")
    assert q.dtype == np.uint8
    assert q.tolist() == ref_quantize(x.tolist(), float(s), 63, 0, 255, "floor")
    assert q.tolist()[:2] == [0, 63]


def test_symmetric_per_channel_weights() -> None:
    w = np.array([[[[1.0, -2.0]]], [[[0.0, 0.0]]], [[[0.5, 0.25]]]], F32)   # OHWI (3, 1, 1, 2)
    qp = per_channel_symmetric(w)
    assert qp.per_channel and qp.zero_point.tolist() == [0, 0, 0]
    assert qp.scale.tolist() == [F32(2.0) / F32(127), ZERO_CHANNEL_SCALE, F32(0.5) / F32(127)]
    q = qp.quantize(w)
    assert q[:, 0, 0, :].tolist() == [[64, -127], [0, 0], [127, 64]]
    assert np.abs(qp.dequantize(q) - w).max() <= qp.scale.max() / 2
    u = per_channel_symmetric(w, dtype="uint8")
    assert u.zero_point.tolist() == [128] * 3 and u.quantize(w)[0, 0, 0].tolist() == [192, 1]


def test_per_channel_needs_matching_first_axis() -> None:
    qp = per_channel_symmetric(np.ones((4, 3), F32))
    with pytest.raises(ValueError, match="channels are always axis 0"):
        qp.quantize(np.ones((3, 4), F32))


@settings(deadline=None)
@given(st.lists(finite32, min_size=1, max_size=40), finite32, finite32,
       st.sampled_from(["nearest", "floor"]), st.sampled_from(["int8", "uint8"]))
def test_quantize_matches_scalar_loop(x: list[float], a: float, b: float, mode: str, dtype: str) -> None:
    qp = qparams_from_range(min(a, b), max(a, b), dtype=dtype)
    got = qp.quantize(np.array(x, F32), rounding=mode).tolist()
    assert got == ref_quantize(x, float(qp.scale), int(qp.zero_point), qp.qmin, qp.qmax, mode)


@settings(deadline=None)
@given(st.lists(finite32, min_size=1, max_size=40), st.integers(0, 2**32 - 1))
def test_stochastic_quantize_matches_loop(x: list[float], seed: int) -> None:
    qp = qparams_from_range(-3.0, 5.0)
    got = qp.quantize(np.array(x, F32), rounding="stochastic", rng=XorShift32(seed)).tolist()
    g = XorShift32(seed)
    ref = []
    for v in x:
        r = F32((g.next_u32() >> 8) * 2.0**-24)
        t = math.floor(float(F32(F32(v) / qp.scale) + r))
        ref.append(min(max(t + int(qp.zero_point), -128), 127))
    assert got == ref


@settings(deadline=None)
@given(st.lists(st.integers(-128, 127), min_size=1, max_size=40), finite32, finite32)
def test_dequantize_matches_loop_and_roundtrips(q: list[int], a: float, b: float) -> None:
    qp = qparams_from_range(min(a, b), max(a, b))
    deq = qp.dequantize(np.array(q, np.int8))
    assert deq.dtype == np.float32
    assert deq.tolist() == [float(F32(v - int(qp.zero_point)) * qp.scale) for v in q]
    assert qp.quantize(deq).tolist() == q                # grid points map back exactly


def test_nan_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        qparams_from_range(-1.0, 1.0).quantize(np.array([np.nan], F32))


def test_qparams_validation() -> None:
    with pytest.raises(ValueError, match="> 0"):
        QParams(np.float32(0.0), 0)
    with pytest.raises(ValueError, match="outside"):
        QParams(np.float32(1.0), 128)
    with pytest.raises(ValueError, match="outside"):
        QParams(np.float32(1.0), -1, "uint8")
    with pytest.raises(ValueError, match="unknown quantized dtype"):
        QParams(np.float32(1.0), 0, "int4")


def test_per_channel_float32_qparams_are_checked_as_any_other() -> None:
    """float32 scales with int32 zero points (what FQT builds every step) take a short check: it
    refuses what the general one refuses, and keeps its own copies."""
    s, z = np.array([0.5, 0.25], F32), np.array([3, -4], np.int32)
    qp = QParams(s, z)
    s[0], z[0] = 9.0, 9
    assert qp.scale.tolist() == [0.5, 0.25] and qp.zero_point.tolist() == [3, -4]
    for bad in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="finite and > 0"):
            QParams(np.array([0.5, bad], F32), np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="outside"):
        QParams(np.array([0.5, 0.5], F32), np.array([0, 200], np.int32))
    with pytest.raises(ValueError, match="outside"):
        QParams(np.array([0.5, 0.5], F32), np.array([0, -1], np.int32), "uint8")


@settings(deadline=None)
@given(st.lists(st.floats(width=32, min_value=2.0**-126, max_value=2.0**126), min_size=1, max_size=5),
       st.integers(-128, 127))
def test_dict_roundtrip_is_exact(scales: list[float], z: int) -> None:
    for qp in (QParams(np.array(scales, F32), np.full(len(scales), z)), QParams(F32(scales[0]), z)):
        back = QParams.from_dict(json.loads(json.dumps(qp.to_dict())))
        assert back == qp and back.scale.tobytes() == qp.scale.tobytes()


def test_quantize_bias() -> None:
    b = quantize_bias(np.array([1.0, -1.0, 0.5, 1e9], F32), F32(0.5), np.array([0.25, 0.25, 0.4, 1e-3], F32))
    sx, sw = np.float64(F32(0.5)), np.array([0.25, 0.25, 0.4, 1e-3], F32).astype(np.float64)
    ref = [ref_round(Fraction(float(v)) / Fraction(float(sx * w)), "nearest")
           for v, w in zip([1.0, -1.0, 0.5], sw[:3].tolist())]
    assert b.tolist()[:3] == ref == [8, -8, ref[2]]
    assert b.tolist()[3] == 2**31 - 1                  # saturated
    assert b.dtype == np.int32


def test_ema_range() -> None:
    ema = EmaRange(0.1)
    with pytest.raises(ValueError, match="no range yet"):
        ema.qparams()
    ema.update(-1.0, 2.0)
    assert (float(ema.lo), float(ema.hi)) == (-1.0, 2.0)        # first update takes the batch
    ema.update(-3.0, 4.0)
    a, keep = F32(0.1), F32(1) - F32(0.1)
    assert ema.lo == keep * F32(-1.0) + a * F32(-3.0) and ema.hi == keep * F32(2.0) + a * F32(4.0)
    back = EmaRange.from_dict(json.loads(json.dumps(ema.to_dict())))
    assert back.lo == ema.lo and back.hi == ema.hi and back.alpha == ema.alpha
    assert ema.qparams() == qparams_from_range(ema.lo, ema.hi)
    per_ch = EmaRange(0.5)
    per_ch.update(np.array([-1.0, 0.0], F32), np.array([1.0, 2.0], F32))
    per_ch.update(np.array([-3.0, -2.0], F32), np.array([1.0, 0.0], F32))
    assert per_ch.lo.tolist() == [-2.0, -1.0] and per_ch.hi.tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="alpha"):
        EmaRange(0.0)
    with pytest.raises(ValueError, match="exceeds"):
        EmaRange(0.1).update(1.0, 0.0)


def test_per_tensor_ranges_give_the_bits_of_the_per_channel_rule():
    """A per-tensor range runs a scalar form of `qparams_from_range`: the same scale and zero
    point, bit for bit, as a one-channel range through the array form, tricky bounds included."""
    rng = np.random.default_rng(5)
    tricky = [0.0, -0.0, 1e-45, -1e-45, float(MIN_SCALE), 3e-39, 1.0, -1.0, 0.5, 127.5, -128.5, 1e30,
              -1e30, 3.4e38, -3.4e38]
    values = tricky + list(rng.standard_normal(40) * 10.0 ** rng.integers(-30, 30, 40))
    pairs = [(a, b) for a in values for b in values if a <= b]
    checked = 0
    for lo, hi in pairs:
        for dtype in ("int8", "uint8"):
            for symmetric in (False, True):
                try:
                    want = qparams_from_range(np.array([lo]), np.array([hi]), dtype, symmetric)
                except ValueError:
                    with pytest.raises(ValueError):
                        qparams_from_range(lo, hi, dtype, symmetric)
                    continue
                got = qparams_from_range(lo, hi, dtype, symmetric)
                assert got.scale.shape == () and got.zero_point.shape == ()
                assert got.scale.dtype == np.float32 and got.zero_point.dtype == np.int32
                assert got.scale.tobytes() == want.scale[0].tobytes(), (lo, hi, dtype, symmetric)
                assert int(got.zero_point) == int(want.zero_point[0]), (lo, hi, dtype, symmetric)
                checked += 1
    assert checked > 1000
