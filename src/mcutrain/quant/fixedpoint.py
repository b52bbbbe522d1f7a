"""Fixed-point requantization: one requantize function per rounding mode (C: ``mt_requantize``).

Two rounding modes are part of the integer specification (docs/integer-semantics.md 6.1);
a `QuantModel` carries its mode in ``rounding``:

- ``single`` (``requantize``): one rounding of the exact product, half away from zero.
- ``tflite`` (``requantize_tflite``): TFLite's ``MultiplyByQuantizedMultiplier``, what the
  TFLite Micro reference kernels and CMSIS-NN's default build compute: a saturating rounding
  doubling high multiply, then a rounding divide by a power of two (two roundings).

A positive real multiplier ``M`` is stored as ``(multiplier, shift)`` with
``multiplier`` an int32 in [2^30, 2^31) and ``M = multiplier * 2^(shift - 31)``.
``requantize(acc, multiplier, shift)`` returns
``round_half_away_from_zero(acc * multiplier / 2^n)``, ``n = 31 - shift``, with a
single rounding in int64:

    p = acc * multiplier                 (|acc| <= 2^31, multiplier < 2^31: |p| < 2^62)
    r = (|p| + 2^(n-1)) >> n             (|p| + 2^61 < 2^63: no overflow)
    result = sign(p) * r

Valid ``n`` is [1, 62] (``M`` in [2^-32, 2^30)). ``quantize_multiplier`` maps
``M < 2^-32`` to ``(0, 0)``, which is exact: ``|acc * M| < 0.5`` rounds to 0 for
every int32 ``acc``. ``M >= 2^30`` is refused (an output scale that small
relative to the inputs saturates everything; the model's ranges are broken).

Example:
    >>> m, s = quantize_multiplier(0.75)
    >>> int(m), int(s)
    (1610612736, 0)
    >>> requantize(np.array([3, -3, 2]), m, s).tolist()   # 2.25, -2.25, 1.5
    [2, -2, 2]
"""

from __future__ import annotations

import math

import numpy as np

from mcutrain.quant.qparams import QParams
from mcutrain.quant.rounding import round_half_away

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
MIN_RIGHT_SHIFT = 1
MAX_RIGHT_SHIFT = 62
ROUNDING_MODES = ("single", "tflite")
"""Requantization rounding modes of the integer specification; ``single`` is the default."""
TFLITE_ADD_LEFT_SHIFT = 20
"""TFLite's int8 ADD scales both centred inputs by 2^20 before requantizing them (|.| < 2^28)."""


def check_rounding(rounding: str) -> str:
    """Return ``rounding`` if it is a known mode, else raise naming the modes."""
    if rounding not in ROUNDING_MODES:
        raise ValueError(f"unknown rounding mode {rounding!r}; use one of {', '.join(ROUNDING_MODES)}")
    return rounding


def quantize_multiplier(m: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``(multiplier, shift)`` int32 arrays for real multipliers ``m >= 0``.

    ``m = f * 2^e`` (``frexp``, f in [0.5, 1), exact); ``multiplier =
    round_half_away(f * 2^31)`` (exact for a float64 ``m`` up to 31
    significant bits, so exact for every float32 and every product of two
    float32 divided once), ``shift = e``; a multiplier rounded up to 2^31 becomes
    2^30 with ``shift + 1``. ``m == 0`` and ``m < 2^-32`` give ``(0, 0)``.
    """
    arr = np.asarray(m, dtype=np.float64)
    if arr.ndim == 0:
        return _quantize_multiplier_scalar(float(arr))
    # NOTE: min >= 0 is False for a NaN too; max < inf then leaves only finite values >= 0
    if arr.size and not (arr.min() >= 0 and arr.max() < math.inf):
        raise ValueError(f"real multiplier must be finite and >= 0, got {arr}")
    f, e = np.frexp(arr)
    q = (f * 2.0**31 + 0.5).astype(np.int64)   # > 0 and exact (f has 53 bits): truncation is floor
    carry = q >> 31                            # 1 where q rounded up to 2^31 (q <= 2^31), else 0
    q >>= carry                                # 2^31 becomes 2^30 ...
    e = e.astype(np.int64) + carry             # ... with shift + 1
    if e.size and e.max() > 31 - MIN_RIGHT_SHIFT:     # m == 0 has e == 0: only m > 0 can be here
        raise ValueError(f"real multiplier {arr.max()} >= 2^30 cannot be requantized: the output scale "
                         "is far too small for its inputs; check the model's quantization ranges")
    tiny = e < 31 - MAX_RIGHT_SHIFT            # m == 0 is (0, 0) already (frexp(0) = (0, 0))
    if tiny.any():
        q[tiny] = 0
        e[tiny] = 0
    return q.astype(np.int32), e.astype(np.int32)


def _quantize_multiplier_scalar(m: float) -> tuple[np.ndarray, np.ndarray]:
    """`quantize_multiplier` of one multiplier: the same steps in Python floats and ints
    (math.frexp is numpy's frexp; the error path and the results are the array form's)."""
    if not (m >= 0 and math.isfinite(m)):
        raise ValueError(f"real multiplier must be finite and >= 0, got {np.float64(m)}")
    f, e = math.frexp(m)
    q = int(f * 2.0**31 + 0.5)
    if q == 2**31:
        q, e = 2**30, e + 1
    if m > 0 and e > 31 - MIN_RIGHT_SHIFT:
        raise ValueError(f"real multiplier {np.float64(m)} >= 2^30 cannot be requantized: the output scale "
                         "is far too small for its inputs; check the model's quantization ranges")
    if e < 31 - MAX_RIGHT_SHIFT:
        q = e = 0
    return np.array(q, np.int32), np.array(e, np.int32)


def output_multiplier(input_scale: float | np.ndarray, weight_scale: float | np.ndarray,
                      output_scale: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``quantize_multiplier(M)`` of conv/linear: ``M_c = (double)s_x * (double)s_w[c] / (double)s_y``.

    The product of two float32 is exact in float64; the division rounds once.
    """
    def f64(v: float | np.ndarray) -> np.ndarray:
        return np.asarray(v, dtype=np.float32).astype(np.float64)
    return quantize_multiplier(f64(input_scale) * f64(weight_scale) / f64(output_scale))


def rounding_shift_right(x: np.ndarray, n: int | np.ndarray) -> np.ndarray:
    """``round_half_away(x / 2^n)`` for int64 ``x`` with ``|x| + 2^(n-1) < 2^63``, n in [1, 62]."""
    nn = np.asarray(n, dtype=np.int64)
    if np.any(nn < MIN_RIGHT_SHIFT) or np.any(nn > MAX_RIGHT_SHIFT):
        raise ValueError(f"right shift {nn} outside [{MIN_RIGHT_SHIFT}, {MAX_RIGHT_SHIFT}]")
    v = np.asarray(x, dtype=np.int64)
    # NOTE: floor((v + 2^(n-1) - [v < 0]) / 2^n) equals sign(v) * ((|v| + 2^(n-1)) >> n), the
    # half-away rule, with one pass less over the data (v >> 63 is -1 for negative v, else 0).
    return (v + (np.int64(1) << (nn - 1)) + (v >> 63)) >> nn


def _checked_operands(acc: np.ndarray, multiplier: int | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(acc, multiplier) as int64 after the contract checks both requantize modes rely on."""
    a = np.asarray(acc)
    if a.dtype.kind not in "iu":
        raise TypeError(f"requantize takes integer accumulators, got {a.dtype}")
    a = a.astype(np.int64, copy=False)
    if a.size and (a.min() < INT32_MIN or a.max() > INT32_MAX):
        raise ValueError("accumulator outside int32 range: the int32 bound of this op was violated")
    mult = np.asarray(multiplier, dtype=np.int64)
    if np.any(mult < 0) or np.any(mult > INT32_MAX):
        raise ValueError(f"multiplier {mult} outside [0, 2^31)")
    return a, mult


def requantize(acc: np.ndarray, multiplier: int | np.ndarray, shift: int | np.ndarray) -> np.ndarray:
    """Mode ``single``: ``round_half_away(acc * multiplier / 2^(31 - shift))`` in int64, one rounding.

    ``multiplier``/``shift`` broadcast against ``acc``: per-channel arrays of
    shape (C,) apply to the last axis (NHWC channels). ``acc`` must be in
    int32 range (accumulators are int32 by the integer contract).
    """
    a, mult = _checked_operands(acc, multiplier)
    return rounding_shift_right(a * mult, 31 - np.asarray(shift, dtype=np.int64))


def requantize_tflite(acc: np.ndarray, multiplier: int | np.ndarray, shift: int | np.ndarray) -> np.ndarray:
    """Mode ``tflite``: TFLite's ``MultiplyByQuantizedMultiplier`` (double rounding), as int64.

    With ``l = max(shift, 0)``, ``r = max(-shift, 0)`` (shift in [-31, 30]):
    ``x = wrap32(acc * 2^l)`` (the C int32 product; it wraps only when ``|acc * M| >= 2^30``),
    ``h = floor((x * multiplier + 2^30) / 2^31)`` (gemmlowp's SaturatingRoundingDoublingHighMul:
    ties up; its one saturating case, both operands INT32_MIN, needs ``multiplier < 0``),
    then ``round_half_away(h / 2^r)`` (RoundingDivideByPOT). Broadcasting as `requantize`.

    Example:
        >>> requantize_tflite(np.array([-3, 1]), 2**30, 0).tolist()   # M = 0.5: -1.5 ties up to -1
        [-1, 1]
        >>> requantize_tflite(np.array([1]), 2**30, -1).tolist()      # M = 0.25: 0.5 then 0.5 -> 1
        [1]
    """
    a, mult = _checked_operands(acc, multiplier)
    sh = np.asarray(shift, dtype=np.int64)
    if np.any(sh < -31) or np.any(sh > 30):
        raise ValueError(f"shift {sh} outside [-31, 30] (TFLite's range)")
    left = np.maximum(sh, 0)
    if np.any(left):
        # |acc| <= 2^31 and l <= 30: |acc * 2^l| <= 2^61 is exact in int64; then the int32 wrap
        a = ((a << left) + (1 << 31) & 0xFFFFFFFF) - (1 << 31)
    # |x * m| <= 2^31 * (2^31 - 1) < 2^62, + 2^30 stays below 2^63; h in [-(2^31 - 1), 2^31 - 2]
    h = a * mult
    h += 1 << 30
    h >>= 31
    right = np.maximum(-sh, 0)
    # NOTE: RoundingDivideByPOT is h + (remainder > threshold) on h >> r; for r >= 1 that is the
    # half-away rule (h + 2^(r-1) - [h < 0]) >> r, and for r = 0 it is h (bias and [h < 0] both 0).
    neg = (h >> 63) & -(right > 0).astype(np.int64)
    h += neg
    h += (np.int64(1) << right) >> 1
    h >>= right
    return h


def requantize_output(acc: np.ndarray, multiplier: int | np.ndarray, shift: int | np.ndarray,
                      zero_point: int, act_min: int, act_max: int, dtype: str | type = "int8", *,
                      bias: np.ndarray | None = None, acc_max: int | None = None,
                      rounding: str = "single") -> np.ndarray:
    """``clamp(requantize(acc + bias) + zero_point, act_min, act_max)`` in ``dtype`` (int8, uint8, int16...).

    The one requantization of the golden model (C: ``mt_requantize``, whose prepared DSP forms
    are proven-equal specializations of it), in the model's ``rounding`` mode (``tflite`` uses
    `requantize_tflite`). ``bias`` (int32 per channel, optional) is added
    exactly. Given ``acc_max`` >= max |acc + bias|, ``acc`` may hold exact integers in a float
    dtype and the rule runs in float64 where that bound proves it exact (several times faster on
    the training engine's large accumulators), bit-identical to the int64 rule.

    Example:
        >>> requantize_output(np.array([3, -3]), 2**30, 0, 1, -128, 127).tolist()   # M = 0.5
        [3, -1]
        >>> requantize_output(np.array([3, -3]), 2**30, 0, 1, -128, 127, rounding="tflite").tolist()
        [3, 0]
    """
    if rounding != "single":
        check_rounding(rounding)
        a = np.asarray(acc)
        a = a.astype(np.int64) if a.dtype.kind == "f" else a    # exact integers (acc_max contract)
        if bias is not None:
            a = np.asarray(a, np.int64) + np.asarray(bias, np.int64)
        y = requantize_tflite(a, multiplier, shift) + np.int64(zero_point)
        return np.clip(y, act_min, act_max).astype(np.dtype(dtype))
    if acc_max is not None:
        return _requantize_bounded(np.asarray(acc), multiplier, shift, zero_point, act_min, act_max,
                                   acc_max, np.dtype(dtype), bias)
    a = acc if bias is None else np.asarray(acc, np.int64) + np.asarray(bias, np.int64)
    y = requantize(a, multiplier, shift) + np.int64(zero_point)
    out = np.clip(y, act_min, act_max)
    return out.astype(np.dtype(dtype))


def requantize_products(acc: np.ndarray, bias: np.ndarray, product_bound: int,
                        multiplier: int | np.ndarray, shift: int | np.ndarray, zero_point: int,
                        act_min: int, act_max: int, rounding: str = "single") -> np.ndarray:
    """int8 ``requantize_output(acc + bias)`` of a conv/linear whose products sum to `acc`.

    `acc` holds exact integers (float32/float64 from an exact GEMM or tap sum, or any int
    dtype), `bias` the int32 biases broadcasting against it, and `product_bound` bounds
    every partial sum of the products (`int_engine.check_accumulator`'s L1 bound). NOTE:
    then ``|acc + b| <= product_bound + max|b| = acc_max``, and with that bound
    `requantize_output` runs its float64 form, which is exact and bit-identical to the int64
    rule where ``acc_max * m' < 2^52`` (m' the multiplier without its trailing zero bits: a
    float32 ratio leaves at most 24 significant bits, so acc_max < 2^28 suffices, and every
    accumulator of an int8 conv with K <= 64 does), and falls back to int64 past it. The
    golden engine's layers and ZO's stacked query sets requantize through this one function.
    """
    bmax = int(np.abs(bias).max(initial=0))
    return requantize_output(acc, multiplier, shift, zero_point, act_min, act_max, bias=bias,
                             acc_max=int(product_bound) + bmax, rounding=rounding)


def _requantize_bounded(acc: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int,
                        zero_point: int, lo: int, hi: int, acc_max: int, dtype: np.dtype,
                        bias: np.ndarray | None) -> np.ndarray:
    """`requantize_output` given `acc_max`: the same rule, bit-identical, through float64 where exact.

    `acc` holds exact integers (any int or float dtype), `bias` (optional, int32 per
    channel) is added exactly, `acc_max` >= max |acc + bias|. Write the multiplier as
    `m' * 2^t` (m' odd: its trailing zeros stripped, n' = n - t; a multiplier from a
    float32 ratio has t >= 7). With `P = acc_max * max(m') < 2^52` the rule runs in
    float64: `v = (acc + b) * (multiplier * 2^-n) = (acc + b) * m' * 2^-n'` is exact (an
    integer below 2^52 times a power of two), and `floor(|v| + 0.5)` is exact too: for
    n' <= 52, |v| + 0.5 is an integer below 2^53 times 2^-n'; for n' > 52,
    |v| < 0.5 - 2^-53 so the sum rounds below 1, and `(|p| + 2^(n-1)) >> n` is 0 as
    well. The bias joins as `acc * m + b * m` (two exact terms with a representable
    sum: no rounding) when `b * m + 0.5` is exact too; otherwise acc + b is formed
    first. Beyond these bounds the rule runs in int64; accumulators outside int32 go
    to `requantize`, which refuses them.
    """
    mult = np.asarray(multiplier, np.int64)
    n = 31 - np.asarray(shift, np.int64)
    mmax = int(mult.max()) if mult.size else 0
    bmax = int(np.abs(np.asarray(bias, np.int64)).max(initial=0)) if bias is not None else 0
    if acc.size == 0 or acc_max > INT32_MAX or mmax > INT32_MAX or mult.min(initial=0) < 0:
        a = acc if acc.dtype.kind in "iu" else acc.astype(np.int64)
        if bias is not None:
            a = a + np.asarray(bias, np.int64)
        y = requantize(a, mult, shift) + np.int64(zero_point)   # refuses what is out of its range
        return np.clip(y, lo, hi).astype(dtype)
    low = mult & -mult                                   # lowest set bit (0 for a zero multiplier)
    t = np.where(low > 0, np.frexp(low.astype(np.float64))[1] - 1, 0)    # exact: powers of two
    m_odd, n_odd = mult >> t, n - t
    mmax, nmax = int(m_odd.max()), int(n_odd.max())
    if acc_max * mmax >= 1 << 52:
        # int64, the rule of fixedpoint.rounding_shift_right without its range checks (done above:
        # |acc + b| <= 2^31 - 1, 0 <= multiplier < 2^31, so |p| < 2^62 and p + 2^(n-1) cannot overflow)
        p = acc.astype(np.int64) if acc.dtype.kind == "f" else acc.astype(np.int64, copy=True)
        if bias is not None:
            p += np.asarray(bias, np.int64)
        p *= mult
        p += p >> 63
        p += np.left_shift(np.int64(1), n - 1)
        p >>= n
        p += np.int64(zero_point)
        np.clip(p, lo, hi, out=p)
        return p.astype(dtype)
    m = mult.astype(np.float64) * np.ldexp(1.0, -n)   # exact: a 31-bit integer times a power of two
    bm = None
    if bias is not None:
        # |acc| <= acc_max + bmax: acc * m exact below 2^53; b * m + 0.5 exact below 2^53 (n <= 53)
        if (acc_max + bmax) * mmax < 1 << 53 and bmax * mmax + (1 << max(nmax - 1, 0)) < 1 << 53:
            bm = np.asarray(bias, np.float64) * m
        else:
            acc = np.add(acc, np.asarray(bias, np.int64), dtype=np.float64)   # exact: below 2^53
    v = np.multiply(acc, m, dtype=np.float64)
    if lo >= zero_point and hi - zero_point <= 255 and np.dtype(dtype).itemsize == 1:
        # NOTE: a clamp at or above the zero point (relu, relu6): every v < 0 ends at lo in
        # both rules, and for v >= 0 round-half-away is floor(v + 0.5) = trunc(v + 0.5);
        # a clamp to integer bounds commutes with floor, so four passes and a byte add do it.
        v += 0.5 if bm is None else bm + 0.5
        np.clip(v, lo - zero_point, hi - zero_point, out=v)
        r8 = v.astype(np.uint8)
        r8 += np.uint8(zero_point & 0xFF)           # mod 256: the result is in [lo, hi] already
        return r8.view(dtype)
    if bm is not None:
        v += bm
    # NOTE: |v| + 0.5 is exact (above), so v + copysign(0.5, v) is too, and truncating it is
    # round-half-away of v; truncation commutes with a clamp to integer bounds and the cast
    # truncates, so the clamp runs before it and the zero point joins the integers after.
    v += np.copysign(0.5, v)
    np.clip(v, lo - zero_point, hi - zero_point, out=v)
    if zero_point == 0:
        return v.astype(dtype)
    r = v.astype(np.int16 if np.dtype(dtype).itemsize == 1 else np.int64)   # |lo - z| <= 255 for bytes
    r += zero_point
    return r.astype(dtype)


def rounding_divide(num: np.ndarray, den: int | np.ndarray) -> np.ndarray:
    """Integer ``round_half_away(num / den)`` for ``den > 0``: ``sign(num) * ((|num| + den // 2) // den)``.

    This is what avgpool uses (sum over the window in int32, divided by the
    window count); C: ``(n >= 0 ? n + d / 2 : n - d / 2) / d`` with C's
    truncating ``/``, identical for ``d > 0``.
    """
    n = np.asarray(num)
    if n.dtype.kind not in "iu":
        raise TypeError(f"rounding_divide takes integers, got {n.dtype}")
    n = n.astype(np.int64)
    d = np.asarray(den, dtype=np.int64)
    if np.any(d <= 0):
        raise ValueError(f"divisor must be > 0, got {d}")
    mag = (np.abs(n) + d // 2) // d
    return np.where(n < 0, -mag, mag)


def activation_range(qp: QParams, act: str) -> tuple[int, int]:
    """``(act_min, act_max)`` of a fused activation in the output's quantized domain.

    none: ``(qmin, qmax)``; relu: ``(max(qmin, z), qmax)``; relu6: also
    ``act_max = min(qmax, z + round_half_away(6.0 / (double)s))`` (float64 division).
    Needs per-tensor qparams.
    """
    if qp.per_channel:
        raise ValueError("activation ranges need per-tensor output qparams")
    z = int(qp.zero_point)
    if act == "none":
        return qp.qmin, qp.qmax
    if act == "relu":
        return max(qp.qmin, z), qp.qmax
    if act == "relu6":
        six = int(round_half_away(np.float64(6.0) / np.float64(qp.scale)))
        return max(qp.qmin, z), min(qp.qmax, z + six)
    raise ValueError(f"unknown activation {act!r}; use none, relu or relu6")


def add_multipliers(scale_a: float, scale_b: float, scale_y: float) -> tuple[int, int, int]:
    """``(Ma, Mb, n)`` for the add op: int32 multipliers of ``s_a/s_y`` and ``s_b/s_y`` sharing shift ``n``.

    ``ra = (double)s_a / (double)s_y``, ``rb`` likewise, ``r = max(ra, rb)``,
    ``frexp(r) = (f, e)``; ``n = min(31 - e, 62)`` makes ``r * 2^n < 2^31``;
    ``Ma = round_half_away(ra * 2^n)`` (same for ``Mb``); if that rounds to 2^31,
    ``n`` is decreased by one and both are recomputed. ``n < 1`` (a ratio of
    2^30 or more) is refused. Then ``y = clamp(z_y + rounding_shift_right(
    (a - z_a) * Ma + (b - z_b) * Mb, n))``: |a - z| <= 255 so each product is
    below 2^39 and the sum fits int64 with room to spare.
    """
    ra = np.float64(np.float32(scale_a)) / np.float64(np.float32(scale_y))
    rb = np.float64(np.float32(scale_b)) / np.float64(np.float32(scale_y))
    if not (np.isfinite(ra) and np.isfinite(rb)) or ra <= 0 or rb <= 0:
        raise ValueError(f"add scales must be finite and > 0: {scale_a}, {scale_b}, {scale_y}")
    _, e = np.frexp(max(ra, rb))
    n = min(31 - int(e), MAX_RIGHT_SHIFT)
    for _ in range(2):
        if n < MIN_RIGHT_SHIFT:
            raise ValueError(f"add input/output scale ratio {max(ra, rb)} >= 2^30 cannot be requantized; "
                             "check the model's quantization ranges")
        ma = int(round_half_away(np.ldexp(ra, n)))
        mb = int(round_half_away(np.ldexp(rb, n)))
        if max(ma, mb) < 2**31:
            return ma, mb, n
        n -= 1
    raise AssertionError("unreachable: one decrement always suffices")


def tflite_add_params(scale_a: float, scale_b: float, scale_y: float
                      ) -> tuple[int, int, int, int, int, int]:
    """``(Ma, sa, Mb, sb, My, sy)`` of TFLite's int8 ADD (mode ``tflite``), from float32 scales.

    TFLite's prepare, in float64: ``t = 2 * max(s_a, s_b)``, ``Ma = s_a / t``, ``Mb = s_b / t``
    (both <= 0.5), ``My = t / (2^20 * s_y)``, each through `quantize_multiplier` (TFLite's
    ``QuantizeMultiplier`` gives the same pairs: frexp, round half away, the 2^31 carry, flush
    below 2^-32). TFLite requires every multiplier < 1 (shift <= 0); ``My >= 1`` is refused.
    Then ``y = clamp(z_y + R(R((a - z_a) 2^20, Ma) + R((b - z_b) 2^20, Mb), My))`` with ``R`` =
    `requantize_tflite`: ``|a - z_a| 2^20 < 2^28``, each scaled term below 2^27, their sum below 2^28.
    """
    sa, sb, sy = (float(np.float32(s)) for s in (scale_a, scale_b, scale_y))
    if not all(np.isfinite(s) and s > 0 for s in (sa, sb, sy)):
        raise ValueError(f"add scales must be finite and > 0: {scale_a}, {scale_b}, {scale_y}")
    twice = 2.0 * max(sa, sb)
    real = (sa / twice, sb / twice, twice / ((1 << TFLITE_ADD_LEFT_SHIFT) * sy))
    if real[2] >= 1.0:
        raise ValueError(f"add output scale {sy} is below 2^-19 of its inputs' ({sa}, {sb}); "
                         "TFLite's ADD cannot requantize it: check the model's quantization ranges")
    out: list[int] = []
    for r in real:
        m, s = quantize_multiplier(r)
        out += [int(m), int(s)]
    return tuple(out)   # type: ignore[return-value]


def tflite_mean_params(count: int) -> tuple[int, int]:
    """``(M', s')`` of TFLite's int8 MEAN over ``count`` elements with equal input/output scales.

    TFLite folds ``1/count`` into ``M = s_in / s_out = 1`` (``(2^30, 1)``): ``k = min(floor(log2
    count), 32, 31 + 1)``, ``M' = (2^30 << k) // count`` (int64, truncating), ``s' = 1 - k``;
    then ``y = clamp(R(sum(q) - z * count, M', s') + z, -128, 127)`` with ``R`` = `requantize_tflite`.
    ``count <= 2^23`` keeps ``|sum - z * count| <= 255 count`` inside int32.
    """
    if not 0 < count <= 1 << 23:
        raise ValueError(f"mean over {count} elements: TFLite's int32 sum needs 1 <= count <= 2^23")
    k = min(int(count).bit_length() - 1, 32)
    return ((1 << 30) << k) // count, 1 - k
