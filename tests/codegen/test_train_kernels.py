"""The C training kernels against their Python twins, bit for bit (host gcc, ASan + UBSan).

Kernel by kernel through `drivers/train_kernels.c` (literal cases and generated ones), then
whole steps through `drivers/train_step.c`: N full `zo` steps (wp, np, mix) and `bp-qas` steps
(with and without momentum) on small int8 models, comparing losses, weights, biases and the
RNG state after every step with `ZOMethod` / `BPQASMethod`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from train_driver import (
    StepConfig,
    build_host_driver,
    first_mismatch,
    read_step_results,
    write_step_file,
)

from conftest import needs_gcc
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.engines import int_engine, ptq
from mcutrain.engines import ste_kernels as sk
from mcutrain.engines.im2col import col2im, im2col
from mcutrain.methods import qas
from mcutrain.methods import zo_estimator as est
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.step_limit import c_max_step
from mcutrain.methods.zo import ZOConfig, ZOMethod
from mcutrain.quant.loss import int_softmax_cross_entropy
from mcutrain.quant.rng import XorShift32
from mcutrain.quant.rounding import round_half_away, round_stochastic, stochastic_shift_right

pytestmark = needs_gcc


# ---------------------------------------------------------------- per-kernel driver


@pytest.fixture(scope="module")
def kernels_exe(tmp_path_factory) -> Path:
    return build_host_driver("train_kernels", tmp_path_factory.mktemp("tk") / "train_kernels")


def i32(v) -> np.ndarray:
    return np.asarray(v).astype(np.int64).astype(np.int32).reshape(-1)


def f32(v) -> np.ndarray:
    return np.asarray(v, np.float32).reshape(-1).view(np.int32)


def s64(v) -> np.ndarray:
    return np.asarray(v, np.int64).reshape(-1).view(np.int32)


def run_kernels(exe: Path, tmp: Path, cases: list[tuple[int, list[np.ndarray]]]) -> list[list[bytes]]:
    """Run every (kernel id, int32 arrays) case in one process; the output blocks of each case."""
    words = []
    for kid, arrays in cases:
        words.append(np.array([kid, len(arrays)], np.int32))
        for a in arrays:
            words += [np.array([a.size], np.int32), a.astype(np.int32)]
    (tmp / "cases.bin").write_bytes(np.concatenate(words).astype("<i4").tobytes())
    proc = subprocess.run([str(exe), str(tmp / "cases.bin"), str(tmp / "results.bin")], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    raw = (tmp / "results.bin").read_bytes()
    blocks, off = [], 0
    while off < len(raw):
        n = int(np.frombuffer(raw[off:off + 4], "<i4")[0])
        blocks.append(raw[off + 4:off + 4 + n])
        off += 4 + n
    return blocks


def arr(block: bytes, dtype) -> np.ndarray:
    return np.frombuffer(block, dtype)


def test_xorshift32_stream(kernels_exe, tmp_path):
    b = run_kernels(kernels_exe, tmp_path, [(1, [i32([1, 5])]), (1, [i32([0, 600])]),
                                            (1, [i32([np.uint32(0xDEADBEEF).view(np.int32), 300])])])
    assert arr(b[1], "<u4").tolist() == XorShift32(1).draw_u32(5).tolist()   # literal: 270369, ...
    assert arr(b[1], "<u4")[:3].tolist() == [270369, 67634689, 2647435461]
    for k, seed, n in [(0, 1, 5), (5, 0, 600), (10, 0xDEADBEEF, 300)]:
        g = XorShift32(seed)
        assert arr(b[k], "<u4")[0] == g.state
        assert np.array_equal(arr(b[k + 1], "<u4"), g.draw_u32(n))
        assert np.array_equal(arr(b[k + 2], "<i4"), g.rademacher(n))
        assert np.array_equal(arr(b[k + 3], "<f4"), g.uniform01(n))
        assert arr(b[k + 4], "<u4")[0] == g.state
    assert arr(b[5], "<u4")[0] == 2463534242 and arr(b[6], "<u4")[0] == 723471715   # seed 0


def test_rounding(kernels_exe, tmp_path):
    lit = np.array([-2.5, -0.5, 0.5, 1.5, 0.49999997, -0.49999997, 2.5, 8388609, -1e9, 0.0], np.float32)
    rng = np.random.default_rng(3)
    gen = (rng.standard_normal(500) * 10.0 ** rng.uniform(-3, 8, 500)).astype(np.float32)
    big = rng.integers(-(2**40), 2**40, 300)
    b = run_kernels(kernels_exe, tmp_path, [(2, [i32([7]), f32(lit)]), (2, [i32([9]), f32(gen)]),
                                            (3, [i32([11, 13]), s64(big)]), (3, [i32([11, 0]), s64(big)])])
    assert arr(b[0], "<f4").tolist() == [-3.0, -1.0, 1.0, 2.0, 0.0, -0.0, 3.0, 8388609.0, -1e9, 0.0]
    for k, x, seed in [(0, lit, 7), (3, gen, 9)]:
        assert np.array_equal(arr(b[k], "<f4"), round_half_away(x))
        g = XorShift32(seed)
        assert np.array_equal(arr(b[k + 1], "<f4"), round_stochastic(x, g))
        assert arr(b[k + 2], "<u4")[0] == g.state
    g = XorShift32(11)
    assert np.array_equal(arr(b[6], "<i8"), stochastic_shift_right(big, 13, g))
    assert arr(b[7], "<u4")[0] == g.state
    assert np.array_equal(arr(b[8], "<i8"), big)


def test_softmax_cross_entropy(kernels_exe, tmp_path):
    rng = np.random.default_rng(4)
    cases, want = [], []
    specs = [(np.array([[10, 0]]), 0.1, [0]),                                   # the docstring example
             (np.array([[127] + [-128] * 9, [5] * 10]), 0.4, [1, 3]),             # adversarial rows
             (rng.integers(-128, 128, (7, 10)), 1e-4, rng.integers(0, 10, 7)),
             (rng.integers(-128, 128, (5, 100)), 0.05, rng.integers(0, 100, 5)),
             (rng.integers(-128, 128, (3, 2)), 3.0, [0, 1, 1]),
             (rng.integers(-128, 128, (2, 7)), float(np.float32(1e-40)), [6, 0])]  # subnormal scale
    for q, s, y in specs:
        q = np.asarray(q)
        cases.append((4, [i32([q.shape[0], q.shape[1], f32([s])[0]]), i32(q), i32(y)]))
        want.append(int_softmax_cross_entropy(q.astype(np.int8), s, 0, np.asarray(y)))
    cases.append((4, [i32([1, 3, f32([0.0])[0]]), i32([1, 2, 3]), i32([0])]))   # bad scale
    b = run_kernels(kernels_exe, tmp_path, cases)
    for k, (loss, err) in enumerate(want):
        assert arr(b[3 * k], "<i4")[0] == 0
        assert np.array_equal(arr(b[3 * k + 1], "<i4"), loss)
        assert np.array_equal(arr(b[3 * k + 2], "<i4"), err.reshape(-1))
    assert arr(b[1], "<i4")[0] == 20530                     # ln(1 + e^-1) * 2^16 = 20530.1
    assert arr(b[-3], "<i4")[0] == -1                                            # MT_ERR_ARG


def test_zo_perturbations(kernels_exe, tmp_path):
    rng = np.random.default_rng(5)
    w = np.concatenate([[127, -127, 126, 0], rng.integers(-127, 128, 60)]).astype(np.int8)
    b = np.concatenate([[2**31 - 50, -(2**31) + 10], rng.integers(-5000, 5000, 6)]).astype(np.int32)
    y = rng.integers(-128, 128, 90).astype(np.int8)
    y[:4] = [-128, -20, 100, 99]
    out = run_kernels(kernels_exe, tmp_path, [(5, [i32([21, 1, 100]), i32(w), i32(b)]),
                                              (5, [i32([22, 3, 7]), i32(w), i32(b)]),
                                              (6, [i32([23, 5, -20, 100]), i32(y)])])
    for k, (seed, sw, sb) in enumerate([(21, 1, 100), (22, 3, 7)]):
        g = XorShift32(seed)
        u = g.rademacher_packed(1, w.size + b.size)[0]      # one sign stream over weights then biases
        wq, bq = est.perturbed_params(w, b, u[None, :w.size], u[None, w.size:], sw, sb)
        assert arr(out[4 * k], "<i4")[0] == 0
        assert np.array_equal(arr(out[4 * k + 1], np.int8), wq[0])
        assert np.array_equal(arr(out[4 * k + 2], "<i4"), bq[0])
        assert arr(out[4 * k + 3], "<u4")[0] == g.state
    g = XorShift32(23)
    u = g.rademacher_packed(1, y.size)[0]
    m = (y > -20) & (y < 100)
    want = np.clip(y.astype(np.int16) + 5 * u * m, -20, 100).astype(np.int8)
    assert np.array_equal(arr(out[9], np.int8), want)
    assert arr(out[9], np.int8)[:3].tolist() == [-20, -20, 100]               # masked (and clamped)
    assert arr(out[10], "<u4")[0] == g.state


def test_zo_accumulation_and_coefficients(kernels_exe, tmp_path):
    rng = np.random.default_rng(6)
    sums = rng.integers(-(2**40), 2**40, 50)
    bsz, d = 3, 17
    dl = rng.integers(-(2**23), 2**23, bsz)
    y = rng.integers(-128, 128, (bsz, d)).astype(np.int8)
    g0 = rng.integers(-(2**28), 2**28, (bsz, d))
    s_w = (10.0 ** rng.uniform(-4, -1, 5)).astype(np.float32)
    out = run_kernels(kernels_exe, tmp_path, [
        (7, [i32([31]), s64([-123456789012]), s64(sums)]),
        (8, [i32([32, bsz, d, -128, 90]), i32(dl), i32(y), i32(g0)]),
        (9, [i32([4 * 50, 511, 1, 50, 5, 4, f32([0.02])[0], f32([0.07])[0]]), f32(s_w)]),
        (9, [i32([50, 10**6, 0, 50, 100, 2**12, f32([0.02])[0], f32([0.07])[0]]), f32(s_w)])])
    g = XorShift32(31)
    want = sums + np.int64(-123456789012) * g.rademacher_packed(1, 50)[0].astype(np.int64)
    assert np.array_equal(arr(out[1], "<i8"), want) and arr(out[2], "<u4")[0] == g.state
    g = XorShift32(32)
    u = g.rademacher_packed(1, bsz * d).reshape(bsz, d).astype(np.int64)   # signs run on across rows
    m = (y > -128) & (y < 90)
    assert np.array_equal(arr(out[4], "<i4"), (g0 + dl[:, None] * u * m).reshape(-1))
    assert arr(out[5], "<u4")[0] == g.state
    coef_cases = [(200, 511, True, 50, 5, 4), (50, 10**6, False, 50, 100, 2**12)]
    for k, (numer, dm1, gns, n, sigma, b) in enumerate(coef_cases):
        gamma = est.gns_gamma(numer, dm1, gns)
        c0 = (gamma / np.float32(n * sigma * b)) * est.LOSS_SCALE
        coef = np.float32(c0) * ((np.float32(0.02) * s_w) / np.float32(0.07))
        blk = out[6 + 4 * k: 10 + 4 * k]
        assert arr(blk[0], "<f4")[0] == gamma and arr(blk[1], "<f4")[0] == c0
        assert np.array_equal(arr(blk[3], "<f4"), coef.astype(np.float32))


CONVS = [  # N H W C  O kh kw  stride  padding(t,b,l,r)  groups
    (2, 5, 5, 3, 4, 3, 3, (1, 1), (1, 1, 1, 1), 1),
    (1, 6, 7, 4, 4, 3, 3, (2, 2), (1, 0, 0, 2), 4),       # depthwise, asymmetric padding
    (2, 4, 4, 4, 6, 2, 3, (1, 2), (0, 1, 1, 1), 2),       # grouped
    (1, 3, 5, 2, 4, 1, 1, (1, 1), (0, 0, 0, 0), 2),       # depthwise with multiplier 2 (groups = C)
    (6, 4, 5, 2, 3, 2, 1, (1, 1), (1, 0, 0, 0), 1),       # batch 6 > fan-in 4 (samples-inner numpy path)
]


def conv_args(n, h, w, c, o, kh, kw, stride, pad, groups, zx) -> tuple[np.ndarray, tuple[int, int]]:
    ho = (h + pad[0] + pad[1] - kh) // stride[0] + 1
    wo = (w + pad[2] + pad[3] - kw) // stride[1] + 1
    return i32([n, h, w, c, o, kh, kw, ho, wo, *stride, pad[0], pad[2], groups, zx]), (ho, wo)


@pytest.mark.parametrize("spec", CONVS)
def test_local_weight_gradient_conv(kernels_exe, tmp_path, spec):
    n, h, w, c, o, kh, kw, stride, pad, groups = spec
    rng = np.random.default_rng(7)
    zx = -37
    args, (ho, wo) = conv_args(*spec, zx)
    x = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
    gacc = rng.integers(-(2**31), 2**31, (n, ho, wo, o))
    gacc[..., 0] = 0
    gr = G.Graph((h, w, c), [G.conv2d("c", G.INPUT, o, (kh, kw), stride=stride, padding=pad, groups=groups,
                                      in_channels=c)])
    qm = ptq.quantize_model(zoo.he_init(gr, seed=1), rng.random((2, h, w, c), dtype=np.float32))
    qm.act_qparams[G.INPUT] = type(qm.act_qparams[G.INPUT])(np.float32(0.1), np.int32(zx))
    want_w, want_b = est.local_weight_grad(qm, "c", x, gacc)
    out = run_kernels(kernels_exe, tmp_path, [(10, [args, i32(x), i32(gacc)])])
    assert arr(out[0], "<i4")[0] == 0
    assert first_mismatch("grad_w", arr(out[1], "<i8").reshape(want_w.shape), want_w) == ""
    assert np.array_equal(arr(out[2], "<i8"), want_b)


def test_local_weight_gradient_linear(kernels_exe, tmp_path):
    rng = np.random.default_rng(8)
    x = rng.integers(-128, 128, (5, 13)).astype(np.int8)
    g = rng.integers(-(2**31), 2**31, (5, 4))
    out = run_kernels(kernels_exe, tmp_path, [(11, [i32([12, 5, 13, 4]), i32(x), i32(g)])])
    xc = x.astype(np.int64) - 12
    exact = g.T.astype(object).dot(xc.astype(object)).astype(np.int64)        # Python ints: no overflow
    assert np.array_equal(arr(out[1], "<i8").reshape(4, 13), exact)
    assert np.array_equal(arr(out[2], "<i8"), g.sum(axis=0))


def test_qas_updates(kernels_exe, tmp_path):
    rng = np.random.default_rng(9)
    o, per = 4, 9
    coef = (10.0 ** rng.uniform(-9, -5, o)).astype(np.float32)
    s_w = (10.0 ** rng.uniform(-3, -1, o)).astype(np.float32)
    sums_w = rng.integers(-(2**45), 2**45, (o, per))
    sums_w[0, :3] = [2**62, -(2**62), 0]                                 # saturating steps
    w = rng.integers(-127, 128, (o, per)).astype(np.int8)
    sums_b = rng.integers(-(2**50), 2**50, o)
    b = np.array([2**31 - 1, -(2**31), 5, -5], np.int32)
    gw = (rng.standard_normal((o, per)) * 1e-3).astype(np.float32)
    gb = (rng.standard_normal(o) * 1e-6).astype(np.float32)
    lr = 0.37
    cases = []
    for use_scale in (1, 0):
        cases.append((12, [i32([f32([lr])[0], o, per, use_scale]), f32(coef), f32(s_w), s64(sums_w), i32(w),
                           s64(sums_b), i32(b), f32(gw), f32(gb)]))
    cases.append((13, [f32([0.9, 0.125]), f32(gw), f32(gw[::-1]), f32(s_w)]))
    out = run_kernels(kernels_exe, tmp_path, cases)
    for k, scale in enumerate([s_w, None]):
        kk = qas.update_factor(lr, coef, scale)
        blk = out[5 * k:5 * k + 5]
        assert np.array_equal(arr(blk[0], "<f4"), kk)
        assert np.array_equal(arr(blk[1], np.int8).reshape(o, per), qas.apply_weight_update(w, sums_w, kk))
        assert np.array_equal(arr(blk[2], "<i4"), qas.apply_bias_update(b, sums_b, kk))
        steps = qas.integer_steps_float(gw, kk)
        assert np.array_equal(arr(blk[3], np.int8).reshape(o, per),
                              np.clip(w.astype(np.int64) - steps, -127, 127).astype(np.int8))
        steps_b = qas.integer_steps_float(gb, kk)
        assert np.array_equal(arr(blk[4], "<i4"), np.clip(b.astype(np.int64) - steps_b, -(2**31), 2**31 - 1))
    assert arr(out[1], np.int8)[0] == -127                                 # a 2^62 sum saturates
    assert np.array_equal(arr(out[10], "<f4"), (np.float32(0.9) * gw[::-1].reshape(-1) + gw.reshape(-1)))
    assert np.array_equal(arr(out[11], "<f4"), qas.bias_scale(np.float32(0.125), s_w))


# ---- BP-QAS float kernels: exact against a numpy twin of the C summation order, and against
# ste_kernels (which computes that order; tests/engines/test_ste_kernels.py holds it against loops)


def seq_sum(terms: np.ndarray, axis: int) -> np.ndarray:
    """float32 sum from 0 in index order along `axis` (np.cumsum accumulates sequentially)."""
    return np.cumsum(terms.astype(np.float32), axis=axis, dtype=np.float32).take(-1, axis=axis)


def conv_bwd_twin(x, zx, e_acc, w, stride, pad, groups):
    """The C kernels' order: bwd_w sums each sample's positions in row-major order, then the samples;
    bwd_in sums each tap over its group's output channels in order, then adds the taps in row-major
    order (col2im)."""
    n, h, wd, c = x.shape
    o, kh, kw, cig = w.shape
    m = e_acc.shape[0] * e_acc.shape[1] * e_acc.shape[2]
    og = o // groups
    cols = im2col(x.astype(np.float32) - np.float32(zx), (kh, kw), stride, pad, 0)
    cols_g = cols.reshape(m, kh * kw, groups, cig).transpose(2, 0, 1, 3).reshape(groups, m, -1)
    e_g = e_acc.reshape(m, groups, og).transpose(1, 2, 0)                          # (G, Og, M)
    prods_w = (e_g[:, :, :, None] * cols_g[:, None, :, :]).reshape(groups, og, n, m // n, -1)
    gw = seq_sum(seq_sum(prods_w, axis=3), axis=2).reshape(w.shape)
    w_g = w.astype(np.float32).reshape(groups, og, kh * kw * cig)
    prods = e_g.transpose(0, 2, 1)[:, :, :, None] * w_g[:, None, :, :]             # (G, M, Og, K)
    cols_in = seq_sum(prods, axis=2)                                               # (G, M, K)
    cols_in = cols_in.reshape(groups, m, kh * kw, cig).transpose(1, 2, 0, 3).reshape(m, kh * kw * c)
    return col2im(cols_in, (n, h, wd, c), (kh, kw), stride, pad), gw


@pytest.mark.parametrize("spec", CONVS)
def test_ste_conv_kernels(kernels_exe, tmp_path, spec):
    n, h, w, c, o, kh, kw, stride, pad, groups = spec
    rng = np.random.default_rng(10)
    zx = 17
    args, (ho, wo) = conv_args(*spec, zx)
    x = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
    wt = rng.integers(-127, 128, (o, kh, kw, c // groups)).astype(np.int8)
    e = (rng.standard_normal((n, ho, wo, o)) * 1e-3).astype(np.float32)
    out = run_kernels(kernels_exe, tmp_path, [(14, [args, i32(x), f32(e), i32(wt)])])
    got_in = arr(out[0], "<f4").reshape(n, h, w, c)
    got_w = arr(out[1], "<f4").reshape(wt.shape)
    twin_in, twin_w = conv_bwd_twin(x, zx, e, wt, stride, pad, groups)
    assert first_mismatch("e_x", got_in, twin_in) == ""
    assert first_mismatch("grad_w", got_w, twin_w) == ""
    # the method's kernels compute the same order: equal bit for bit, not only close
    py_in = sk.conv2d_bwd_in_s8_f32(e, wt, x.shape, stride, pad, groups)
    py_w = sk.conv2d_bwd_w_s8_f32(x, zx, e, wt.shape, stride, pad, groups)
    assert first_mismatch("e_x vs ste_kernels", got_in, py_in) == ""
    assert first_mismatch("grad_w vs ste_kernels", got_w, py_w) == ""


def test_ste_linear_and_elementwise_kernels(kernels_exe, tmp_path):
    rng = np.random.default_rng(11)
    bsz, i, o = 6, 20, 5
    x = rng.integers(-128, 128, (bsz, i)).astype(np.int8)
    wt = rng.integers(-127, 128, (o, i)).astype(np.int8)
    e = (rng.standard_normal((bsz, o)) * 1e-3).astype(np.float32)
    y = rng.integers(-128, 128, (bsz, o)).astype(np.int8)
    slope = (10.0 ** rng.uniform(-3, 0, o)).astype(np.float32)
    err = rng.integers(-(2**24), 2**24, (3, 10))
    cases = [(15, [i32([-9, bsz, i, o]), i32(x), f32(e), i32(wt)]),
             (16, [i32([bsz, o, -100, 120]), f32(e), i32(y), f32(slope)]),
             (18, [i32([-100, 120, f32([0.75])[0], f32([1.5])[0], 3, 10, f32([0.2])[0]]), i32(y), f32(e),
                   i32(err)])]
    out = run_kernels(kernels_exe, tmp_path, cases)
    xc = x.astype(np.float32) - np.float32(-9)
    twin_in = seq_sum(e[:, :, None] * wt.astype(np.float32)[None], axis=1)
    assert np.array_equal(arr(out[0], "<f4").reshape(bsz, i), twin_in)
    assert np.array_equal(arr(out[1], "<f4").reshape(o, i), seq_sum(e[:, :, None] * xc[:, None, :], axis=0))
    assert np.array_equal(arr(out[0], "<f4").reshape(bsz, i), sk.linear_bwd_in_s8_f32(e, wt))
    assert np.array_equal(arr(out[1], "<f4").reshape(o, i), sk.linear_bwd_w_s8_f32(x, -9, e))
    e_acc = sk.requant_bwd_f32(e, y, slope, -100, 120)
    assert np.array_equal(arr(out[2], "<f4").reshape(bsz, o), e_acc)
    assert np.array_equal(arr(out[3], "<f4"), seq_sum(e_acc, axis=0))
    assert np.array_equal(arr(out[3], "<f4"), sk.bias_bwd_f32(e_acc))
    mask = (y > -100) & (y < 120)
    assert np.array_equal(arr(out[4], "<f4").reshape(bsz, o), np.where(mask, e, np.float32(0)))
    ea, eb = sk.add_bwd_f32(e, y, np.float32(0.75), np.float32(1.5), -100, 120)
    assert np.array_equal(arr(out[5], "<f4").reshape(bsz, o), ea)
    assert np.array_equal(arr(out[6], "<f4").reshape(bsz, o), eb)
    want_l = err.astype(np.float32) * np.float32(2.0**-24 / 3) * np.float32(0.2)
    assert np.array_equal(arr(out[7], "<f4").reshape(3, 10), want_l)
    # an add whose first input needs no error (NULL), in place; the error sum of a skip tensor
    assert np.array_equal(arr(out[8], "<f4").reshape(bsz, o), eb)
    relu_e = np.where(mask, e, np.float32(0)).astype(np.float32)
    assert np.array_equal(arr(out[9], "<f4").reshape(bsz, o), (relu_e + ea) + eb)


@pytest.mark.parametrize(("op", "kernel", "stride"), [(3, (2, 2), (2, 2)), (3, (3, 3), (1, 1)),
                                                      (4, (3, 2), (1, 2)), (5, (0, 0), (0, 0))])
def test_ste_pool_kernels(kernels_exe, tmp_path, op, kernel, stride):
    rng = np.random.default_rng(12)
    n, h, w, c = 2, 6, 5, 3
    x = rng.integers(-4, 4, (n, h, w, c)).astype(np.int8)          # few levels: many tied maxima
    if op == 5:
        ho, wo = 1, 1
        y = int_engine.global_avgpool_fwd_s8(x)
    else:
        ho, wo = (h - kernel[0]) // stride[0] + 1, (w - kernel[1]) // stride[1] + 1
        fwd = int_engine.maxpool_fwd_s8 if op == 3 else int_engine.avgpool_fwd_s8
        y = fwd(x, kernel, stride)
    e = (rng.standard_normal((n, ho, wo, c)) * 1e-2).astype(np.float32)
    out = run_kernels(kernels_exe, tmp_path, [(17, [i32([op, n, h, w, c, *kernel, *stride, ho, wo]), i32(x),
                                                    i32(y), f32(e)])])
    if op == 3:
        want = sk.maxpool_bwd_s8_f32(x, y.reshape(e.shape), e, kernel, stride)
    elif op == 4:
        want = sk.avgpool_bwd_f32(e, x.shape, kernel, stride)
    else:
        want = sk.global_avgpool_bwd_f32(e, x.shape)
    assert first_mismatch("e_x", arr(out[0], "<f4").reshape(x.shape), want) == ""


# ---------------------------------------------------------------- whole steps


@pytest.fixture(scope="module")
def step_exe(tmp_path_factory) -> Path:
    return build_host_driver("train_step", tmp_path_factory.mktemp("ts") / "train_step")


def tiny_graph() -> G.Graph:
    """conv(relu) -> maxpool -> depthwise(relu6, stride 2, asymmetric padding) -> flatten -> linear."""
    nodes = [G.conv2d("conv1", G.INPUT, 3, 3, padding=1, act="relu", in_channels=2),
             G.maxpool("pool", "conv1", 2),
             G.conv2d("dw", "pool", 3, 3, stride=2, padding=(1, 1, 0, 2), groups=3, act="relu6",
                      in_channels=3),
             G.flatten("flat", "dw"),
             G.linear("fc", "flat", 4, in_features=2 * 2 * 3)]
    return zoo.he_init(G.Graph((6, 6, 2), nodes, "tiny-train"), seed=3)


def model_and_data(arch: str, steps: int, bsz: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    g = tiny_graph() if arch == "tiny" else zoo.build(arch, seed=1)
    k = g.num_classes
    x = rng.random((steps * bsz, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, k, steps * bsz)
    for n in g.parametric():
        n.params["bias"] = rng.normal(0, 0.1, n.params["bias"].shape).astype(np.float32)
    qm = ptq.quantize_model(g, x)
    return qm, [(x[i * bsz:(i + 1) * bsz], y[i * bsz:(i + 1) * bsz]) for i in range(steps)]


def run_step_driver(exe: Path, tmp: Path, qm, cfg: StepConfig, batches, trained: list[str]):
    data = [(int_engine.quantize_input(qm, x), y) for x, y in batches]
    write_step_file(tmp / "steps.bin", qm, cfg, data)
    proc = subprocess.run([str(exe), str(tmp / "steps.bin"), str(tmp / "out.bin")], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    return read_step_results(tmp / "out.bin", qm, trained, len(batches[0][1]), len(batches))


def zo_case(arch: str, perturb: str, queries: int, lr: float, steps: int = 3, bsz: int = 4, **config):
    qm, batches = model_and_data(arch, steps, bsz)
    m = ZOMethod(qm, ZOConfig(queries=queries, perturb=perturb, seed=5, **config))
    kinds = {u.layers[0]: u.kind for u in m.units}
    c = m.cfg
    cfg = StepConfig("zo", lr, kinds, c.queries, c.sigma_w, c.sigma_b, c.sigma_node, c.gns, c.qas,
                     m.rng.state, max_step=c_max_step(c.max_step))
    return qm, batches, m, cfg, kinds


def compare_steps(results, method, batches, lr: float, trained: list[str]) -> int:
    """Step the Python method and compare after every step; returns how many entries moved."""
    qm0 = {n: (method.qm.weights[n].copy(), method.qm.biases[n].copy()) for n in trained}
    for s, ((x, y), r) in enumerate(zip(batches, results)):
        base = int_engine.run(method.qm, int_engine.quantize_input(method.qm, x))
        l0 = est.per_sample_loss(method.qm, base[method.qm.graph.output].reshape(len(x), -1), y)
        method.step(x, y, lr)
        msgs = [first_mismatch(f"step {s} losses", r.losses, l0)]
        for n in trained:
            msgs.append(first_mismatch(f"step {s} {n}.weight", r.weights[n], method.qm.weights[n]))
            msgs.append(first_mismatch(f"step {s} {n}.bias", r.biases[n], method.qm.biases[n]))
        if hasattr(method, "rng") and r.rng_state != method.rng.state:
            msgs.append(f"step {s} rng state: C {r.rng_state} != Python {method.rng.state}")
        msgs = [m for m in msgs if m]
        assert not msgs, "; ".join(msgs)
    return sum(int(np.sum(method.qm.weights[n] != w)) + int(np.sum(method.qm.biases[n] != b))
               for n, (w, b) in qm0.items())


ZO_CASES = [("tiny", "mix", 6, 2.0), ("tiny", "wp", 6, 5.0), ("tiny", "np", 6, 2.0),
            ("digits-cnn", "mix", 4, 0.05)]


@pytest.mark.parametrize(("arch", "perturb", "queries", "lr"), ZO_CASES)
def test_zo_steps_bit_exact(step_exe, tmp_path, arch, perturb, queries, lr):
    qm, batches, m, cfg, kinds = zo_case(arch, perturb, queries, lr)
    assert set(kinds.values()) == ({"wp", "np"} if perturb == "mix" else {perturb})
    results = run_step_driver(step_exe, tmp_path, qm, cfg, batches, list(kinds))
    moved = compare_steps(results, m, batches, lr, list(kinds))
    assert moved > 0, "the steps changed nothing: equality would be trivial"


@pytest.mark.parametrize(("arch", "momentum"), [("tiny", 0.0), ("tiny", 0.9), ("digits-cnn", 0.5)])
def test_bp_qas_steps(step_exe, tmp_path, arch, momentum):
    """C and the Python method sum every float32 reduction in the same documented order
    (integer-semantics 12.6), so the losses, weights and biases agree exactly after every step by
    construction; the kernel tests above hold each float kernel to that order."""
    qm, batches = model_and_data(arch, 3, 4, seed=1)
    m = BPQASMethod(qm, BPQASConfig(trainable="all", momentum=momentum))
    trained = list(m.weight_layers)
    cfg = StepConfig("bp-qas", 0.05, dict.fromkeys(trained, "bp"), momentum=momentum)
    results = run_step_driver(step_exe, tmp_path, qm, cfg, batches, trained)
    assert compare_steps(results, m, batches, 0.05, trained) > 0
