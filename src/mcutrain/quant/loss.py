"""Integer softmax cross-entropy: loss and error (p - onehot) from int8 logits, no libm.

``exp`` and ``log`` of numpy and of newlib differ in their last bits, and the
ZO method takes differences of losses, so both are replaced by fixed-point
routines using only int64 additions, multiplications, shifts and one integer
division per element. Every intermediate is non-negative except the final
error, so each ``>>`` is a plain floor of a non-negative value (no C
implementation-defined shifts). The steps, per sample (``docs/integer-semantics.md``
repeats them as the normative text):

1. Gaps. ``d_k = q_max - q_k`` in [0, 255] (the zero point cancels). The
   logit scale ``s`` (float32) is ``m * 2^(e - 31)`` exactly (``m`` in [2^30, 2^31),
   frexp). ``g_k = s * d_k`` in Q24: ``p = d_k * m``, ``n = 7 - e``; ``n >= 1``:
   ``g = (p + 2^(n-1)) >> n`` (n capped at 62, which changes nothing as p < 2^39);
   ``n <= 0``: ``g = min(p << min(-n, 2), 2^31 - 1)`` (saturates: gaps of 128 or more).
2. ``E_k = exp(-g_k)`` in Q30: ``y = (g * LOG2E_Q30 + 2^23) >> 24`` (Q30 of g * log2 e),
   ``k = y >> 30``, ``f = y & (2^30 - 1)``. If ``f == 0``: ``P = 2^31``; else
   ``u = ((2^30 - f) * LN2_Q30 + 2^29) >> 30`` and ``P = exp(u)`` by Horner over
   ``EXP_COEFFS`` (``acc = c_11; acc = c_i + ((acc * u + 2^29) >> 30)`` for i = 10..0).
   Then ``2^-y = 2^(1-f) * 2^-(k+1)``: ``E = (P + 2^k) >> (k + 1)`` for k < 32, else 0.
3. ``S = sum_k E_k`` (int64; ``S >= 2^30`` since the top logit has ``E = 2^30``).
4. ``p_k = (E_k * 2^24 + S / 2) / S`` (Q24, integer division), ``err_k = p_k - 2^24 [k == label]``.
5. ``ln(S / 2^30)``: ``L = floor(log2 S)``, ``j = L - 30``; ``w = S - 2^L`` brought to Q30
   (``j == 0``: as is; ``j >= 1``: ``(w + 2^(j-1)) >> j``); ``z = ((w << 30) + D / 2) / D``
   with ``D = 2^31 + w`` (z = w / (2 + w), Q30); ``z2 = (z * z + 2^29) >> 30``;
   Horner over ``ATANH_COEFFS`` in ``z2`` (``acc = c_8; acc = c_i + ((acc * z2 + 2^29) >> 30)``);
   ``ln(1 + w) = (z * acc + 2^28) >> 29``; ``lse = j * LN2_Q30 + ln(1 + w)`` (Q30).
6. ``loss = (lse + (g_label << 6) + 2^13) >> 14`` (Q16).

Accuracy against float64 is stated by ``MAX_LOSS_ERROR`` and ``MAX_PROB_ERROR``
(tests/quant/test_loss.py enforces both). A sample whose label's gap reaches 128
(only possible when ``255 * s >= 128``) has its loss capped near ``128 + ln K``.

Example:
    >>> loss, err = int_softmax_cross_entropy(np.array([[10, 0]], np.int8), 0.1, 0, np.array([0]))
    >>> round(int(loss[0]) / 2**LOSS_FRAC_BITS, 4), round(int(err[0, 1]) / 2**PROB_FRAC_BITS, 4)
    (0.3133, 0.2689)
"""

from __future__ import annotations

import math

import numpy as np

LOSS_FRAC_BITS = 16
"""Per-sample loss is int32 Q16: resolution 1.5e-5, room for batch sums of up to ~150 samples in int32."""
PROB_FRAC_BITS = 24
"""Probabilities and errors are int32 Q24: |err| <= 2^24, so batch sums of 127 samples fit int32."""
GAP_FRAC_BITS = 24
GAP_MAX = 2**31 - 1
"""Gaps saturate at 128 (Q24): exp(-128) is 0 in Q30 anyway; only the loss of such a sample is capped."""
MAX_CLASSES = 1 << 16

LOG2E_Q30 = 1549082005   # round(log2(e) * 2^30)
LN2_Q30 = 744261118      # round(ln(2) * 2^30)
EXP_COEFFS = tuple(round(2**30 / math.factorial(i)) for i in range(12))
"""Q30 Taylor coefficients 1/i!, i = 0..11, of exp(u) on [0, ln 2] (truncation < 2^-34)."""
ATANH_COEFFS = tuple(round(2**30 / (2 * i + 1)) for i in range(9))
"""Q30 coefficients 1/(2i+1), i = 0..8: ln(1+w) = 2 z sum z^(2i)/(2i+1), z = w/(2+w) <= 1/3."""

MAX_LOSS_ERROR = 2.0**-16
"""Bound on |loss - float64 loss| for gaps below 128 (measured: 0.502 LSB of Q16, the final rounding)."""
MAX_PROB_ERROR = 2.0**-21
"""Bound on |p - float64 p| for up to 1000 classes (measured: 5.5 LSB of Q24, when 999 equal logits
each carry the same sub-LSB error of their Q30 exp into the sum; 0.5 LSB for 10 classes)."""


def _scale_fixed(scale: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """``s = m * 2^(e - 31)`` exactly for float32 ``s > 0`` (m in [2^30, 2^31)); one scale per
    sample as a (B, 1) column (a scalar: one for the batch)."""
    s = np.asarray(scale, np.float32).astype(np.float64).reshape(-1, 1)
    if not (np.all(np.isfinite(s)) and np.all(s > 0)):
        raise ValueError(f"logit scale must be finite and > 0, got {scale}")
    f, e = np.frexp(s)
    m = (f * 2**31).astype(np.int64)        # exact: a float32 mantissa has 24 bits
    return m, e.astype(np.int64)


def _gaps_q24(d: np.ndarray, m: np.ndarray, e: np.ndarray) -> np.ndarray:
    p = d * m
    n = 7 - e
    right = np.clip(n, 1, 62)
    g = np.where(n >= 1, (p + (np.int64(1) << (right - 1))) >> right, p << np.clip(-n, 0, 2))
    return np.minimum(g, np.int64(GAP_MAX))


def _horner(coeffs: tuple[int, ...], x: np.ndarray) -> np.ndarray:
    acc = np.full(x.shape, coeffs[-1], dtype=np.int64)
    for c in coeffs[-2::-1]:      # loop over the polynomial's coefficients, vectorized over elements
        acc = np.int64(c) + ((acc * x + (1 << 29)) >> 30)
    return acc


def exp_neg_q30(g: np.ndarray) -> np.ndarray:
    """``exp(-g / 2^24)`` in Q30 for int64 ``g`` in [0, 2^31) (step 2)."""
    y = (g * np.int64(LOG2E_Q30) + (1 << 23)) >> 24
    k = y >> 30
    f = y & ((1 << 30) - 1)
    u = (((1 << 30) - f) * np.int64(LN2_Q30) + (1 << 29)) >> 30
    poly = np.where(f == 0, np.int64(1 << 31), _horner(EXP_COEFFS, u))
    ks = np.minimum(k, 31)
    e = (poly + (np.int64(1) << ks)) >> (ks + 1)
    return np.where(k >= 32, np.int64(0), e)


def log_q30(s: np.ndarray) -> np.ndarray:
    """``ln(S / 2^30)`` in Q30 for int64 ``S`` in [2^30, 2^53) (step 5)."""
    _, ex = np.frexp(s.astype(np.float64))      # exact: S < 2^53
    top = ex.astype(np.int64) - 1                # floor(log2 S)
    j = top - 30
    w = s - (np.int64(1) << top)
    js = np.maximum(j, 1)
    w = np.where(j == 0, w, (w + (np.int64(1) << (js - 1))) >> js)
    den = np.int64(1 << 31) + w
    z = ((w << 30) + den // 2) // den
    z2 = (z * z + (1 << 29)) >> 30
    ln1p = (z * _horner(ATANH_COEFFS, z2) + (1 << 28)) >> 29
    return j * np.int64(LN2_Q30) + ln1p


def int_softmax_cross_entropy(logits_q: np.ndarray, scale: np.ndarray | float, zero_point: np.ndarray | int,
                              labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample loss (int32 Q16, shape (B,)) and error p - onehot (int32 Q24, shape (B, K)).

    ``logits_q`` are int8 (B, K) with real value ``scale * (q - zero_point)``; scale and zero
    point are one for the batch or one per sample (shape (B,): FQT float32's logits, each
    quantized with its own range). The zero point cancels in softmax and is only validated.
    See the module docstring for the exact integer steps.
    """
    q = np.asarray(logits_q)
    if q.ndim != 2 or q.shape[1] < 1:
        raise ValueError(f"logits must have shape (batch, classes), got {q.shape}")
    if q.dtype.kind not in "iu" or (q.size and (q.min() < -128 or q.max() > 127)):
        raise ValueError("logits must be int8 values in [-128, 127]")
    if q.shape[1] > MAX_CLASSES:
        raise ValueError(f"at most {MAX_CLASSES} classes are supported, got {q.shape[1]}")
    zp = np.asarray(zero_point)
    if zp.size and (zp.min() < -128 or zp.max() > 127):
        raise ValueError(f"logit zero point {zero_point} outside [-128, 127]")
    if np.ndim(scale) and np.shape(scale) != (q.shape[0],):
        raise ValueError(f"per-sample logit scales must have shape ({q.shape[0]},), got {np.shape(scale)}")
    y = np.asarray(labels)
    if y.shape != (q.shape[0],) or y.dtype.kind not in "iu":
        raise ValueError(f"labels must be integers of shape ({q.shape[0]},), got {y.dtype} {y.shape}")
    if y.size and (y.min() < 0 or y.max() >= q.shape[1]):
        raise ValueError(f"labels must be class indices in [0, {q.shape[1] - 1}]")
    m, e = _scale_fixed(scale)
    q64 = q.astype(np.int64)
    d = q64.max(axis=1, keepdims=True) - q64
    g = _gaps_q24(d, m, e)
    ex = exp_neg_q30(g)
    total = ex.sum(axis=1, keepdims=True)
    prob = ((ex << PROB_FRAC_BITS) + total // 2) // total
    rows = np.arange(q.shape[0])
    err = prob.copy()
    err[rows, y] -= np.int64(1) << PROB_FRAC_BITS
    lse = log_q30(total[:, 0])
    shift = 30 - LOSS_FRAC_BITS
    loss = (lse + (g[rows, y] << (30 - GAP_FRAC_BITS)) + (1 << (shift - 1))) >> shift
    return loss.astype(np.int32), err.astype(np.int32)
