"""The two requantization rounding modes: `single` and `tflite` (TFLite's MultiplyByQuantizedMultiplier).

`ref_mbqm` below is a plain-int transcription of TFLite's reference double-rounding code
(gemmlowp's SaturatingRoundingDoublingHighMul and RoundingDivideByPOT, C int32 semantics:
truncating division, arithmetic shifts, the int32 wrap of the left shift), written from
its definition so that the vectorized `requantize_tflite` is checked against it with ==.
"""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.engines import int_engine as ie
from mcutrain.engines import ptq
from mcutrain.qmodel import QuantModel
from mcutrain.quant.fixedpoint import (
    INT32_MAX,
    INT32_MIN,
    quantize_multiplier,
    requantize,
    requantize_output,
    requantize_tflite,
    tflite_add_params,
    tflite_mean_params,
)


def wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def c_div(a: int, b: int) -> int:
    """C's integer division: truncation toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def ref_srdhm(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 a, b."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return wrap32(c_div(ab + nudge, 1 << 31))


def ref_rdbpot(x: int, exponent: int) -> int:
    """gemmlowp RoundingDivideByPOT on int32 x, 0 <= exponent <= 31."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def ref_mbqm(x: int, multiplier: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier(int32 x, int32 multiplier, int shift), double rounding."""
    left = shift if shift > 0 else 0
    right = 0 if shift > 0 else -shift
    return ref_rdbpot(ref_srdhm(wrap32(x * (1 << left)), multiplier), right)


def ref_quantize_multiplier(m: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier (double-rounding build): frexp, round half away, carry, flush."""
    import math
    if m == 0.0:
        return 0, 0
    q, shift = math.frexp(m)
    q_fixed = math.floor(abs(q) * 2**31 + 0.5) * (1 if q >= 0 else -1)   # std::round
    if q_fixed == 2**31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def tfl(acc: list[int], m: int, s: int) -> list[int]:
    return requantize_tflite(np.array(acc, np.int64), m, s).tolist()


def test_hand_checked_cases() -> None:
    # M = 0.5 (2^30, 0): the doubling high multiply rounds ties up, single rounds them away from 0
    assert tfl([3, -3, 1, -1, 0], 1 << 30, 0) == [2, -1, 1, 0, 0]
    assert requantize(np.array([3, -3, 1, -1, 0]), 1 << 30, 0).tolist() == [2, -2, 1, -1, 0]
    # M = 0.25 (2^30, -1): x = 1 is 0.25 exactly, but 0.5 after the first rounding, 1 after the second
    assert tfl([1, -1, 2, -2, 3, -3, 6, -6], 1 << 30, -1) == [1, 0, 1, -1, 1, -1, 2, -2]
    assert requantize(np.array([1, -1, 2, -2, 3, -3, 6, -6]), 1 << 30, -1).tolist() == \
        [0, 0, 1, -1, 1, -1, 2, -2]
    # acc = INT32_MIN with the largest multiplier: no saturation (multiplier >= 0), exact high half
    assert tfl([INT32_MIN], INT32_MAX, 0) == [-(2**31) + 1]
    assert tfl([INT32_MIN, INT32_MAX], INT32_MAX, -31) == [-1, 1]
    assert tfl([INT32_MAX], INT32_MAX, 0) == [2**31 - 2]
    # shift -31 (the smallest TFLite allows): +-2^30 * 2^30 * 2^-62 = +-0.25 rounds to 0
    assert tfl([1 << 30, -(1 << 30)], 1 << 30, -31) == [0, 0]
    assert tfl([INT32_MIN], 1 << 30, -30) == [-1]          # -2^31 * 2^-31 = -1 exactly
    # positive shifts: x * 2^l first (int32), then the high multiply; 3 * 0.5 * 2^5 = 48
    assert tfl([3, -3], 1 << 30, 5) == [48, -48]
    # shift 30: acc 1 -> 2^30 * 2^30 / 2^31 = 2^29; acc 2 wraps 2^31 to INT32_MIN (as C does)
    assert tfl([1, 2, -2], 1 << 30, 30) == [1 << 29, -(1 << 30), -(1 << 30)]
    assert ref_mbqm(2, 1 << 30, 30) == -(1 << 30)


def test_range_checks() -> None:
    with pytest.raises(ValueError, match="shift"):
        requantize_tflite(np.array([1]), 1 << 30, 31)
    with pytest.raises(ValueError, match="shift"):
        requantize_tflite(np.array([1]), 1 << 30, -32)
    with pytest.raises(ValueError, match="int32"):
        requantize_tflite(np.array([2**31]), 1 << 30, 0)
    with pytest.raises(ValueError, match="multiplier"):
        requantize_tflite(np.array([1]), -1, 0)
    with pytest.raises(ValueError, match="rounding"):
        requantize_output(np.array([1]), 1 << 30, 0, 0, -128, 127, rounding="nearest")


def test_vectorized_equals_scalar_reference() -> None:
    rng = np.random.default_rng(17)
    n = 100_000
    acc = rng.integers(INT32_MIN, INT32_MAX, n, endpoint=True)
    # half of the accumulators small (the int8 models' range), half over the full int32 range
    acc[: n // 2] = rng.integers(-(1 << 20), 1 << 20, n // 2)
    acc[:8] = [INT32_MIN, INT32_MAX, -1, 0, 1, INT32_MIN + 1, -(1 << 30), 1 << 30]
    mult = rng.integers(0, INT32_MAX, n, endpoint=True)
    mult[: n // 4] = rng.integers(1 << 30, INT32_MAX, n // 4, endpoint=True)
    mult[8:12] = [0, INT32_MAX, 1 << 30, 1]
    shift = rng.integers(-31, 30, n, endpoint=True)
    got = requantize_tflite(acc, mult, shift)
    want = np.array([ref_mbqm(int(a), int(m), int(s)) for a, m, s in zip(acc, mult, shift, strict=True)])
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(int(acc[i]), int(mult[i]), int(shift[i]), int(got[i]), int(want[i]))
                           for i in bad[:5]]


def test_per_channel_broadcast() -> None:
    acc = np.arange(-50, 50, dtype=np.int64).reshape(25, 4)
    m = np.array([1 << 30, 1 << 30, INT32_MAX, 1 << 30])
    s = np.array([0, -1, -3, 2])
    got = requantize_tflite(acc, m, s)
    want = [[ref_mbqm(int(a), int(m[c]), int(s[c])) for c, a in enumerate(row)] for row in acc]
    assert got.tolist() == want


def test_quantize_multiplier_equals_tflites() -> None:
    rng = np.random.default_rng(3)
    f32 = rng.random(20_000, dtype=np.float32) * np.float32(2.0) + np.float32(1e-6)
    ms = np.concatenate([f32.astype(np.float64) * f32[::-1].astype(np.float64) / 0.37,
                         2.0 ** rng.uniform(-33, 29.9, 20_000), [0.5, 1.0, 1 - 2**-40, 2**-32, 2**-33]])
    q, s = quantize_multiplier(ms)
    assert [(int(a), int(b)) for a, b in zip(q, s, strict=True)] == [ref_quantize_multiplier(float(m))
                                                                      for m in ms]


def test_difference_rate_between_modes() -> None:
    """The modes differ by at most 1 LSB, on a fraction 2^-(r+1) of outputs (r = -shift).

    The first rounding (to 2^-r) moves a value across a tie of the second in an interval of
    half an LSB of 2^-r per unit: with uniform fractions, the rate is 2^-(r+1) (measured here
    0.53% for r in 6..11; a layer with M ~ 2^-9 differs on ~0.1% of its outputs).
    """
    rng = np.random.default_rng(5)
    n = 1_000_000
    acc = rng.integers(-(1 << 17), 1 << 17, n)
    ms = rng.uniform(2.0**-12, 2.0**-6, n)
    m, s = quantize_multiplier(ms)
    single = requantize(acc, m, s)
    tflite = requantize_tflite(acc, m, s)
    diff = np.abs(single - tflite)
    assert diff.max() == 1
    rate = float((diff != 0).mean())
    expected = float(np.mean(np.ldexp(1.0, s.astype(np.int64) - 1)))
    assert abs(rate / expected - 1) < 0.05, (rate, expected)
    # where they differ the exact value lies within 2^-(r+1) of a tie (r = -shift): the first
    # rounding, to 2^-r, moved it across the tie. acc * m < 2^48 and the power of two are exact.
    exact = acc.astype(np.float64) * m * np.ldexp(1.0, s.astype(np.int64) - 31)
    d = diff != 0
    gap = np.abs(np.abs(exact[d] - np.trunc(exact[d])) - 0.5)
    assert (gap <= np.ldexp(1.0, s[d].astype(np.int64) - 1)).all()


def _model(rounding: str) -> tuple[QuantModel, np.ndarray]:
    x = np.random.default_rng(0).random((64, 8, 8, 1), dtype=np.float32)
    return ptq.quantize_model(zoo.build("digits-cnn"), x, rounding=rounding), x


def test_model_carries_its_mode(tmp_path) -> None:
    qm, _ = _model("tflite")
    assert qm.rounding == "tflite"
    back = QuantModel.load(qm.save(tmp_path / "m.npz"))
    assert back.rounding == "tflite"
    single, _ = _model("single")
    assert QuantModel.load(single.save(tmp_path / "s.npz")).rounding == "single"
    with pytest.raises(ValueError, match="rounding"):
        QuantModel(qm.graph, qm.act_qparams, qm.weights, qm.weight_qparams, qm.biases, rounding="x")


def test_old_file_without_rounding_loads_single(tmp_path) -> None:
    from mcutrain import io
    qm, _ = _model("single")
    meta, arrays = qm.to_file()
    del meta["quant"]["rounding"]
    path = io.save(tmp_path / "old.npz", qm.graph, meta, arrays)
    assert QuantModel.load(path).rounding == "single"


def test_engine_uses_the_models_mode() -> None:
    qm, x = _model("single")
    xq = ie.quantize_input(qm, x)
    a = ie.forward(qm, xq)
    qm.rounding = "tflite"
    b = ie.forward(qm, xq)
    assert (a != b).any()
    assert np.abs(a.astype(np.int64) - b).max() <= 2
    # the last layer alone: the engine's logits are its requantization of the same accumulators
    t = ie.run(qm, xq)
    fc = qm.graph.node("fc")
    got = ie.run_node(qm, fc, [t["flatten"]])
    acc = (t["flatten"].astype(np.int64) - qm.zero_point("flatten")) @ qm.weights["fc"].T.astype(np.int64)
    mult, shift = qm.requant_params(fc)
    lo, hi = qm.act_range(fc)
    want = np.clip(requantize_tflite(acc + qm.biases["fc"], mult, shift) + qm.zero_point("fc"), lo, hi)
    assert (got == want).all()


def test_tflite_add_and_mean_prepare() -> None:
    ma, sa, mb, sb, my, sy = tflite_add_params(0.02, 0.01, 0.03)
    f = [float(np.float32(v)) for v in (0.02, 0.01, 0.03)]     # TFLite: float32 scales, float64 math
    assert (ma, sa) == (1 << 30, 0)                          # the larger input: exactly 0.5
    assert (mb, sb) == tuple(int(v) for v in quantize_multiplier(f[1] / (2 * f[0])))
    assert (my, sy) == tuple(int(v) for v in quantize_multiplier(2 * f[0] / (2**20 * f[2])))
    assert tflite_mean_params(4) == (1 << 30, -1)            # 1/4: M' = 2^30, shift 1 - 2
    assert tflite_mean_params(49) == ((1 << 35) // 49, -4)
    with pytest.raises(ValueError, match="ADD"):
        tflite_add_params(1.0, 1.0, 2.0**-21)


def test_tflite_mean_and_add_kernels() -> None:
    x = np.array([[[[1], [2]], [[2], [2]]]], np.int8)         # (1, 2, 2, 1), sum 7, z = 0
    m, s = tflite_mean_params(4)
    assert ie.global_avgpool_fwd_s8_tflite(x, 0, m, s).ravel().tolist() == [2]     # 1.75
    xn = -x
    assert ie.global_avgpool_fwd_s8_tflite(xn, 0, m, s).ravel().tolist() == [-2]
    # 3 x 3 windows: 1/9 folded into the multiplier; every (sum, zero point) agrees with the
    # scalar transcription of TFLite's MEAN
    m9, s9 = tflite_mean_params(9)
    assert (m9, s9) == ((1 << 33) // 9, -2)
    rng = np.random.default_rng(2)
    xs = rng.integers(-128, 128, (200, 3, 3, 1)).astype(np.int8)
    for z in (-128, -3, 0, 5, 127):
        got = ie.global_avgpool_fwd_s8_tflite(xs, z, m9, s9).ravel()
        want = [max(-128, min(127, ref_mbqm(int(v.astype(np.int64).sum()) - 9 * z, m9, s9) + z)) for v in xs]
        assert got.tolist() == want
    a = np.array([10, -10], np.int8)
    b = np.array([4, 4], np.int8)
    p = tflite_add_params(0.5, 0.5, 0.5)
    assert ie.add_fwd_s8_tflite(a, 0, b, 0, p, 0, -128, 127).tolist() == [14, -6]


def test_fqt_trains_a_tflite_model_in_the_simulator_and_its_c_step_takes_it() -> None:
    import argparse

    from mcutrain.api.device import build_method as device_method
    from mcutrain.methods.factory import build_method, defaults, resolve
    qm, x = _model("tflite")
    v = argparse.Namespace(trainable="all", seed=0)
    m = build_method("fqt", resolve(v, "export", "fqt"), qm, x)
    assert m.rounding == "tflite"
    assert np.array_equal(m.logits_and_losses(x, np.zeros(len(x), int))[0],
                          ie.forward(qm, ie.quantize_input(qm, x)))
    args = argparse.Namespace(**{**defaults("export"), "method": "fqt", "trainable": "all"})
    assert device_method(args, qm, x).rounding == "tflite"    # the C step runs the model's mode


def test_zo_queries_run_the_models_mode() -> None:
    """ZO's fused conv+maxpool query pass equals the engine's full pass in mode tflite."""
    from mcutrain.methods import zo_forward as zf
    x = np.random.default_rng(1).random((8, 28, 28, 1), dtype=np.float32)
    qm = ptq.quantize_model(zoo.build("small-cnn"), x, rounding="tflite")
    base = ie.run(qm, ie.quantize_input(qm, x))
    conv = qm.graph.node("conv2")
    pool = zf.fusable_pool(qm, conv)
    assert pool is not None
    got = zf.param_fwd_multi(qm, conv, base["pool1"][None], qm.weights["conv2"][None],
                             qm.biases["conv2"][None], pool)[0]
    assert (got == base["pool2"]).all()
    single = ie.run(QuantModel(qm.graph, qm.act_qparams, qm.weights, qm.weight_qparams, qm.biases),
                    base["input"])
    assert (single["fc2"] != base["fc2"]).any()
