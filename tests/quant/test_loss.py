"""Integer softmax cross-entropy: a scalar plain-int transcription (the C port's template) and float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcutrain.quant.loss import (
    ATANH_COEFFS,
    EXP_COEFFS,
    LN2_Q30,
    LOG2E_Q30,
    LOSS_FRAC_BITS,
    MAX_LOSS_ERROR,
    MAX_PROB_ERROR,
    PROB_FRAC_BITS,
    int_softmax_cross_entropy,
)


def ref_sample(q: list[int], scale: float, label: int) -> tuple[int, list[int]]:
    """One sample, step by step as the module docstring says, in Python ints."""
    f, e = math.frexp(float(np.float32(scale)))
    m = int(f * 2**31)
    qmax = max(q)
    gaps = []
    for v in q:                                            # 1. gaps in Q24, saturating
        p = (qmax - v) * m
        n = 7 - e
        g = (p + (1 << (min(n, 62) - 1))) >> min(n, 62) if n >= 1 else p << min(-n, 2)
        gaps.append(min(g, 2**31 - 1))
    exps = []
    for g in gaps:                                         # 2. exp(-g) in Q30
        y = (g * LOG2E_Q30 + (1 << 23)) >> 24
        k, frac = y >> 30, y & ((1 << 30) - 1)
        if frac == 0:
            poly = 1 << 31
        else:
            u = (((1 << 30) - frac) * LN2_Q30 + (1 << 29)) >> 30
            poly = EXP_COEFFS[11]
            for c in reversed(EXP_COEFFS[:11]):
                poly = c + ((poly * u + (1 << 29)) >> 30)
        exps.append(0 if k >= 32 else (poly + (1 << k)) >> (k + 1))
    total = sum(exps)                                      # 3.
    err = [(x * 2**24 + total // 2) // total for x in exps]  # 4.
    err[label] -= 1 << 24
    top = total.bit_length() - 1                           # 5. ln(S / 2^30)
    j = top - 30
    w = total - (1 << top)
    if j >= 1:
        w = (w + (1 << (j - 1))) >> j
    den = (1 << 31) + w
    z = ((w << 30) + den // 2) // den
    z2 = (z * z + (1 << 29)) >> 30
    acc = ATANH_COEFFS[8]
    for c in reversed(ATANH_COEFFS[:8]):
        acc = c + ((acc * z2 + (1 << 29)) >> 30)
    lse = j * LN2_Q30 + ((z * acc + (1 << 28)) >> 29)
    loss = (lse + (gaps[label] << 6) + (1 << 13)) >> 14   # 6.
    return loss, err


def test_constants_are_what_they_claim() -> None:
    assert LOG2E_Q30 == round(math.log2(math.e) * 2**30) and LN2_Q30 == round(math.log(2) * 2**30)
    assert EXP_COEFFS[:3] == (2**30, 2**30, 2**29) and ATANH_COEFFS[:2] == (2**30, round(2**30 / 3))
    assert (LOSS_FRAC_BITS, PROB_FRAC_BITS) == (16, 24)


def test_hand_example() -> None:
    loss, err = int_softmax_cross_entropy(np.array([[10, 0], [0, 0]], np.int8), 0.1, -5, np.array([0, 1]))
    p0 = math.e / (math.e + 1)
    assert abs(loss[0] / 2**16 - (-math.log(p0))) <= 2**-16
    assert loss[1] == round(math.log(2) * 2**16)                   # equal logits: ln 2 exactly rounded
    assert err[1].tolist() == [2**23, -(2**23)]                    # p = 1/2 each, exact
    assert err[0, 0] + err[0, 1] in (-1, 0, 1) and loss.dtype == np.int32 and err.dtype == np.int32


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40).flatmap(lambda k: st.tuples(
    st.lists(st.lists(st.integers(-128, 127), min_size=k, max_size=k), min_size=1, max_size=6),
    st.lists(st.integers(0, k - 1), min_size=6, max_size=6))),
    st.floats(width=32, min_value=2.0**-40, max_value=2.0**20), st.integers(-128, 127))
def test_matches_scalar_reference(data: tuple[list[list[int]], list[int]], scale: float, zp: int) -> None:
    rows, labels = data
    labels = labels[:len(rows)]
    loss, err = int_softmax_cross_entropy(np.array(rows, np.int8), scale, zp, np.array(labels))
    for b, (row, y) in enumerate(zip(rows, labels)):
        ref_loss, ref_err = ref_sample(row, scale, y)
        assert loss[b] == ref_loss
        assert err[b].tolist() == ref_err


@pytest.mark.parametrize("scale", [1e-6, 0.003, 0.02, 0.0625, 0.1, 0.2, 0.49])
@pytest.mark.parametrize("classes", [2, 10, 100, 1000])
def test_accuracy_against_float64(scale: float, classes: int) -> None:
    rng = np.random.default_rng(classes)
    q = rng.integers(-128, 128, size=(64, classes)).astype(np.int8)
    q[0] = -128
    q[0, 0] = 127                                          # one dominant logit, many equal ones
    q[1] = 5                                               # all equal
    labels = rng.integers(0, classes, size=64)
    loss, err = int_softmax_cross_entropy(q, scale, 7, labels)
    x = np.float64(np.float32(scale)) * (q.astype(np.float64) - 7)
    x -= x.max(axis=1, keepdims=True)
    lse = np.log(np.exp(x).sum(axis=1))
    ref_loss = lse - x[np.arange(64), labels]
    ref_err = np.exp(x - lse[:, None]) - np.eye(classes)[labels]
    assert np.abs(loss / 2**LOSS_FRAC_BITS - ref_loss).max() <= MAX_LOSS_ERROR
    assert np.abs(err / 2**PROB_FRAC_BITS - ref_err).max() <= MAX_PROB_ERROR


def test_saturating_gaps() -> None:
    q = np.array([[127, -128, 0]], np.int8)
    loss, err = int_softmax_cross_entropy(q, 1000.0, 0, np.array([1]))   # gap 255000: saturates at 128
    assert loss[0] == (2**31 - 1 + 2**7) >> 8                           # 128 + ln(1) in Q16, capped
    assert err[0].tolist() == [2**24, -(2**24), 0]
    tiny_loss, tiny_err = int_softmax_cross_entropy(q, 2.0**-40, 0, np.array([0]))
    assert tiny_loss[0] == round(math.log(3) * 2**16)                 # scale ~0: uniform over 3
    assert abs(int(tiny_err[0, 1]) - round(2**24 / 3)) <= 1


def test_bad_input() -> None:
    q = np.zeros((2, 3), np.int8)
    with pytest.raises(ValueError, match="class indices"):
        int_softmax_cross_entropy(q, 0.1, 0, np.array([0, 3]))
    with pytest.raises(ValueError, match="shape"):
        int_softmax_cross_entropy(q[0], 0.1, 0, np.array([0]))
    with pytest.raises(ValueError, match="scale"):
        int_softmax_cross_entropy(q, 0.0, 0, np.array([0, 1]))
    with pytest.raises(ValueError, match="int8"):
        int_softmax_cross_entropy(q.astype(np.int32) + 200, 0.1, 0, np.array([0, 1]))


def test_per_sample_scales_give_each_row_its_own_scalar_loss():
    """One scale and zero point per sample (FQT float32's logits) is the scalar call on each row."""
    rng = np.random.default_rng(3)
    q = rng.integers(-128, 128, (6, 10)).astype(np.int8)
    scales = np.array([1e-30, 0.004, 0.1, 0.5, 1.0, 3.0], np.float32)
    zps = np.array([-128, -3, 0, 5, 17, 127])
    y = rng.integers(0, 10, 6)
    loss, err = int_softmax_cross_entropy(q, scales, zps, y)
    for b in range(6):
        lb, eb = int_softmax_cross_entropy(q[b:b + 1], float(scales[b]), int(zps[b]), y[b:b + 1])
        assert lb[0] == loss[b] and np.array_equal(eb[0], err[b])
    assert len(set(loss.tolist())) > 3
    with pytest.raises(ValueError, match="per-sample logit scales"):
        int_softmax_cross_entropy(q, scales[:5], zps, y)
