"""The STE backward kernels of `bp-qas` against plain float32 loops in the C order, bit for bit.

Each reference below is a line-by-line transcription of its C twin
(`codegen/runtime/mt_*_bwd_*_f32.c`): numpy float32 scalars, every sum from
+0.0 in index order, every product rounded before the add. Results are
compared as bit patterns (so even the sign of a zero must agree). The data
mixes magnitudes over six decades so that sums cancel and another order gives
other bits (each case checks that the reversed order differs somewhere, or the
test could not tell orders apart).
"""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain.engines import int_engine, ordered_sparse
from mcutrain.engines import ste_kernels as sk

F0 = np.float32(0.0)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


def assert_bits_equal(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == np.float32
    bad = np.argwhere(bits(got) != bits(want))
    assert not len(bad), f"{len(bad)} differ, first at {bad[0].tolist()}: {got[tuple(bad[0])]!r} != " \
                         f"{want[tuple(bad[0])]!r}"


def wide_errors(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Errors spanning 1e-3..1e3 with both signs, a few exact zeros: sums that cancel."""
    e = rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3, shape)
    e[rng.random(shape) < 0.1] = 0.0
    return e.astype(np.float32)


# ---------------------------------------------------------------- plain loops (the C order)


def ref_conv_bwd_in(e, w, x_shape, stride, padding, groups, rev=False):
    """mt_conv2d_bwd_in_s8_f32: per input element, taps row-major, each tap a sum over its group's
    outputs. `rev` sums everything in reverse (the control order)."""
    n_, h, wd, c = x_shape
    o, kh, kw, cg = w.shape
    og = o // groups
    ho, wo = e.shape[1:3]
    out = np.zeros(x_shape, np.float32)
    taps = [(ky, kx) for ky in range(kh) for kx in range(kw)]
    for n in range(n_):
        for y in range(h):
            for x in range(wd):
                for ch in range(c):
                    gi, i = divmod(ch, cg)
                    acc = F0
                    for ky, kx in (taps[::-1] if rev else taps):
                        py, px = y + padding[0] - ky, x + padding[2] - kx
                        if py < 0 or py % stride[0] or py // stride[0] >= ho:
                            continue
                        if px < 0 or px % stride[1] or px // stride[1] >= wo:
                            continue
                        oy, ox = py // stride[0], px // stride[1]
                        t = F0
                        js = range(gi * og, gi * og + og)
                        for j in (reversed(js) if rev else js):
                            t = t + np.float32(w[j, ky, kx, i]) * e[n, oy, ox, j]
                        acc = acc + t
                    out[n, y, x, ch] = acc
    return out


def ref_conv_bwd_w(x, zx, e, w_shape, stride, padding, groups, rev=False):
    """mt_conv2d_bwd_w_s8_f32: per weight, per sample the positions row-major, then the samples."""
    n_, h, wd, _ = x.shape
    o, kh, kw, cg = w_shape
    og = o // groups
    ho, wo = e.shape[1:3]
    gw = np.zeros(w_shape, np.float32)
    samples = range(n_)
    positions = [(oy, ox) for oy in range(ho) for ox in range(wo)]
    for oc in range(o):
        cin = (oc // og) * cg
        for ky in range(kh):
            for kx in range(kw):
                for i in range(cg):
                    acc = F0
                    for n in (reversed(samples) if rev else samples):
                        t = F0
                        for oy, ox in (positions[::-1] if rev else positions):
                            y, xx = oy * stride[0] - padding[0] + ky, ox * stride[1] - padding[2] + kx
                            if 0 <= y < h and 0 <= xx < wd:
                                t = t + np.float32(int(x[n, y, xx, cin + i]) - zx) * e[n, oy, ox, oc]
                        acc = acc + t
                    gw[oc, ky, kx, i] = acc
    return gw


def ref_linear_bwd_in(e, w, rev=False):
    """mt_linear_bwd_in_s8_f32: e_x[n, i] = sum over o in order."""
    out = np.zeros((e.shape[0], w.shape[1]), np.float32)
    outs = range(w.shape[0])
    for n in range(e.shape[0]):
        for i in range(w.shape[1]):
            acc = F0
            for o in (reversed(outs) if rev else outs):
                acc = acc + np.float32(w[o, i]) * e[n, o]
            out[n, i] = acc
    return out


def ref_linear_bwd_w(x, zx, e, rev=False):
    """mt_linear_bwd_w_s8_f32: g[o, i] = sum over samples in order."""
    out = np.zeros((e.shape[1], x.shape[1]), np.float32)
    samples = range(x.shape[0])
    for o in range(e.shape[1]):
        for i in range(x.shape[1]):
            acc = F0
            for n in (reversed(samples) if rev else samples):
                acc = acc + np.float32(int(x[n, i]) - zx) * e[n, o]
            out[o, i] = acc
    return out


def ref_bias_bwd(e2):
    """mt_bias_bwd_f32: column sums in row order from +0.0."""
    out = np.zeros(e2.shape[1], np.float32)
    for m in range(e2.shape[0]):
        for c in range(e2.shape[1]):
            out[c] = out[c] + e2[m, c]
    return out


# ---------------------------------------------------------------- cases

CONVS = [  # N H W C  O kh kw  stride  padding(t,b,l,r)  groups
    (2, 5, 5, 3, 4, 3, 3, (1, 1), (1, 1, 1, 1), 1),        # dense, fan-in 27 > batch
    (6, 5, 4, 1, 5, 2, 2, (1, 1), (1, 0, 0, 1), 1),        # one channel, fan-in 4 < batch 6
    (3, 6, 7, 4, 4, 3, 3, (2, 2), (1, 0, 0, 2), 4),        # depthwise, stride 2, asymmetric padding
    (2, 5, 4, 3, 6, 3, 2, (1, 2), (1, 1, 0, 1), 3),        # depthwise with multiplier 2
    (2, 4, 4, 4, 6, 2, 3, (1, 2), (0, 1, 1, 1), 2),        # grouped
    (5, 3, 4, 2, 3, 1, 1, (1, 1), (0, 0, 0, 0), 1),        # pointwise (col2im's no-copy path)
]


@pytest.fixture(params=[(None, False), (7, False), (None, True), (7, True)],
                ids=["default", "block-7", "sparse", "sparse-block-7"])
def block(request, monkeypatch):
    """Every kernel also with tiny working blocks (block boundaries fall mid-sum) and with the
    zero-skipping path forced on (the data has 10% zero errors to skip)."""
    size, sparse = request.param
    if size is not None:
        monkeypatch.setattr(sk, "BLOCK", size)
        monkeypatch.setattr(sk, "BIG_BLOCK", size)
        monkeypatch.setattr(ordered_sparse, "ROW_BLOCK_FLOATS", size)
    if sparse:
        monkeypatch.setattr(sk, "SPARSE_DENSITY", 2.0)
        monkeypatch.setattr(sk, "SPARSE_MIN_FAN_IN", 1)
    return request.param


@pytest.mark.parametrize("spec", CONVS, ids=[f"conv{i}" for i in range(len(CONVS))])
def test_conv_kernels_equal_the_c_loops(spec, block):
    n, h, wd, c, o, kh, kw, stride, pad, groups = spec
    rng = np.random.default_rng(sum(spec[:7]))
    ho = (h + pad[0] + pad[1] - kh) // stride[0] + 1
    wo = (wd + pad[2] + pad[3] - kw) // stride[1] + 1
    x = rng.integers(-128, 128, (n, h, wd, c)).astype(np.int8)
    w = rng.integers(-127, 128, (o, kh, kw, c // groups)).astype(np.int8)
    e = wide_errors(rng, (n, ho, wo, o))
    zx = -19
    want_in = ref_conv_bwd_in(e, w, x.shape, stride, pad, groups)
    want_w = ref_conv_bwd_w(x, zx, e, w.shape, stride, pad, groups)
    assert_bits_equal(sk.conv2d_bwd_in_s8_f32(e, w, x.shape, stride, pad, groups), want_in)
    assert_bits_equal(sk.conv2d_bwd_w_s8_f32(x, zx, e, w.shape, stride, pad, groups), want_w)
    # the data is order-sensitive: summing in reverse changes some results
    assert np.any(bits(ref_conv_bwd_w(x, zx, e, w.shape, stride, pad, groups, rev=True)) != bits(want_w))
    if kh * kw * (o // groups) > 1:
        assert np.any(bits(ref_conv_bwd_in(e, w, x.shape, stride, pad, groups, rev=True)) != bits(want_in))


def test_linear_and_bias_kernels_equal_the_c_loops(block):
    rng = np.random.default_rng(21)
    bsz, i, o = 9, 23, 7
    x = rng.integers(-128, 128, (bsz, i)).astype(np.int8)
    w = rng.integers(-127, 128, (o, i)).astype(np.int8)
    e = wide_errors(rng, (bsz, o))
    want_in, want_w = ref_linear_bwd_in(e, w), ref_linear_bwd_w(x, 5, e)
    assert_bits_equal(sk.linear_bwd_in_s8_f32(e, w), want_in)
    assert_bits_equal(sk.linear_bwd_w_s8_f32(x, 5, e), want_w)
    assert np.any(bits(ref_linear_bwd_in(e, w, rev=True)) != bits(want_in))
    assert np.any(bits(ref_linear_bwd_w(x, 5, e, rev=True)) != bits(want_w))
    e4 = wide_errors(rng, (3, 5, 4, 6))
    want_b = ref_bias_bwd(e4.reshape(-1, 6))
    assert_bits_equal(sk.bias_bwd_f32(e4), want_b)
    assert np.any(bits(ref_bias_bwd(e4.reshape(-1, 6)[::-1])) != bits(want_b))


def test_sequential_sum_literals():
    # in float32, 1e8 + 1 == 1e8: the order decides between 1 (sequential) and 2 (exact)
    rows = np.array([[1e8, 1.0], [1.0, 1e8], [-1e8, -1e8], [1.0, 1.0]], np.float32)
    assert sk.add_rows_f32(np.zeros(2, np.float32), rows).tolist() == [1.0, 1.0]
    assert sk.bias_bwd_f32(rows).tolist() == [1.0, 1.0]
    # a running sum seeded with the accumulator: ((acc + r0) + r1) ...
    assert sk.add_rows_f32(np.array([-1e8, 3.0], np.float32), rows[:2]).tolist() == [1.0, 1e8]
    # a zero sum is +0.0, as C's acc = 0.0f gives, even from -0.0 terms
    z = sk.bias_bwd_f32(np.array([[-0.0], [-0.0]], np.float32))
    assert bits(z).tolist() == [0]
    e = np.array([[1e8, 1.0, -1e8, 1.0]], np.float32)                     # one sample, 4 outputs
    assert sk.linear_bwd_in_s8_f32(e, np.ones((4, 1), np.int8)).tolist() == [[1.0]]
    assert sk.linear_bwd_w_s8_f32(np.ones((4, 1), np.int8), 0, e.T).tolist() == [[1.0]]


def test_conv_weight_gradient_sums_each_sample_first():
    """One weight (1x1, one channel), two samples of two positions: per sample, then samples."""
    x = np.ones((2, 1, 2, 1), np.int8)
    e = np.array([1e8, 1.0, 1.0, -1e8], np.float32).reshape(2, 1, 2, 1)
    gw = sk.conv2d_bwd_w_s8_f32(x, 0, e, (1, 1, 1, 1), (1, 1), (0, 0, 0, 0))
    assert gw.reshape(-1).tolist() == [0.0]     # (1e8 + 1) + (1 - 1e8) = 1e8 - 1e8; one chain gives 1


def test_pool_kernels_equal_the_c_loops():
    rng = np.random.default_rng(22)
    n, h, w, c = 2, 6, 5, 3
    x = rng.integers(-3, 3, (n, h, w, c)).astype(np.int8)                 # many tied maxima
    for kernel, stride in [((3, 3), (1, 1)), ((2, 2), (2, 2)), ((3, 2), (1, 2))]:
        ho, wo = (h - kernel[0]) // stride[0] + 1, (w - kernel[1]) // stride[1] + 1
        y = int_engine.maxpool_fwd_s8(x, kernel, stride).reshape(n, ho, wo, c)
        e = wide_errors(rng, (n, ho, wo, c))
        want_max = np.zeros(x.shape, np.float32)
        want_avg = np.zeros(x.shape, np.float32)
        count = np.float32(kernel[0] * kernel[1])
        for ky in range(kernel[0]):                 # taps outer, as the C kernels add the shares
            for kx in range(kernel[1]):
                for b, oy, ox, ch in np.ndindex(n, ho, wo, c):
                    window = x[b, oy * stride[0]:oy * stride[0] + kernel[0],
                               ox * stride[1]:ox * stride[1] + kernel[1], ch].reshape(-1)
                    iy, ix = oy * stride[0] + ky, ox * stride[1] + kx
                    if int(np.argmax(window == y[b, oy, ox, ch])) == ky * kernel[1] + kx:
                        want_max[b, iy, ix, ch] = want_max[b, iy, ix, ch] + e[b, oy, ox, ch]
                    want_avg[b, iy, ix, ch] = want_avg[b, iy, ix, ch] + e[b, oy, ox, ch] / count
        assert_bits_equal(sk.maxpool_bwd_s8_f32(x, y, e, kernel, stride), want_max)
        assert_bits_equal(sk.avgpool_bwd_f32(e, x.shape, kernel, stride), want_avg)
