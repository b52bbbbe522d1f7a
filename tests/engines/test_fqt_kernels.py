"""FQT kernels: hand-checked cases, the three GEMM modes, pooling paths and the sequential order."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain.engines import fqt_kernels as K
from mcutrain.engines import fqt_pool as POOL


def _conv_loops(x, w, stride, pad):
    """Plain loops: conv over NHWC x and OHWI w, zero padding, int64."""
    n, h, wd, _ = x.shape
    o, kh, kw, _ = w.shape
    pt, pb, pl, pr = pad
    ho, wo = (h + pt + pb - kh) // stride + 1, (wd + pl + pr - kw) // stride + 1
    out = np.zeros((n, ho, wo, o), np.int64)
    for b in range(n):
        for i in range(ho):
            for j in range(wo):
                for oc in range(o):
                    s = 0
                    for a in range(kh):
                        for bb in range(kw):
                            hh, ww = i * stride + a - pt, j * stride + bb - pl
                            if 0 <= hh < h and 0 <= ww < wd:
                                s += int(np.dot(x[b, hh, ww].astype(np.int64), w[oc, a, bb].astype(np.int64)))
                    out[b, i, j, oc] = s
    return out


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    x = rng.integers(-255, 256, (2, 5, 5, 3)).astype(np.int32)
    w = rng.integers(-255, 256, (4, 3, 3, 3)).astype(np.int32)
    return x, w


def test_conv_forward_matches_loops(data):
    x, w = data
    want = _conv_loops(x, w, 2, (1, 1, 1, 1))
    got = K.conv2d_fwd_acc(x, w, (2, 2), (1, 1, 1, 1), 1, "int")
    assert got.dtype == np.int64 and np.array_equal(got, want)
    # float32 operands, exact integer values, same result
    assert np.array_equal(K.conv2d_fwd_acc(x.astype(np.float32), w.astype(np.float32), (2, 2),
                                           (1, 1, 1, 1), 1, "int", 255), want)


def test_conv_backward_is_the_adjoint(data):
    """<conv(x), e> == <x, bwd_in(e)> == <w, bwd_w(x, e)> exactly, in integers."""
    x, w = data
    y = K.conv2d_fwd_acc(x, w, (2, 2), (1, 1, 1, 1), 1, "int")
    e = np.random.default_rng(1).integers(-127, 128, y.shape).astype(np.int32)
    dx = K.conv2d_bwd_in_acc(e, w, x.shape, (2, 2), (1, 1, 1, 1), 1, "int")
    dw = K.conv2d_bwd_w_acc(x, e, w.shape, (2, 2), (1, 1, 1, 1), 1, "int")
    ref = int((y * e).sum())
    assert int((x.astype(np.int64) * dx).sum()) == ref
    assert int((w.astype(np.int64) * dw).sum()) == ref
    per = K.conv2d_bwd_w_acc(x, e, w.shape, (2, 2), (1, 1, 1, 1), 1, "int", per_sample=True)
    assert per.shape == (2, *w.shape) and np.array_equal(per.sum(0), dw)


def test_depthwise_and_grouped_adjoint():
    rng = np.random.default_rng(2)
    x = rng.integers(-50, 50, (2, 4, 4, 4)).astype(np.int32)
    for w, groups in ((rng.integers(-9, 9, (8, 3, 3, 1)), 4), (rng.integers(-9, 9, (4, 3, 3, 2)), 2)):
        w = w.astype(np.int32)
        y = K.conv2d_fwd_acc(x, w, (1, 1), (1, 1, 1, 1), groups, "int")
        e = rng.integers(-9, 9, y.shape).astype(np.int32)
        dx = K.conv2d_bwd_in_acc(e, w, x.shape, (1, 1), (1, 1, 1, 1), groups, "int")
        dw = K.conv2d_bwd_w_acc(x, e, w.shape, (1, 1), (1, 1, 1, 1), groups, "int")
        ref = int((y * e).sum())
        assert int((x.astype(np.int64) * dx).sum()) == ref
        assert int((w.astype(np.int64) * dw).sum()) == ref


def test_linear_hand_checked():
    x = np.array([[1, 2, 3]], np.int32)
    w = np.array([[1, 0, -1], [2, 2, 2]], np.int32)
    e = np.array([[3, -1]], np.int32)
    assert K.linear_fwd_acc(x, w, "int").tolist() == [[-2, 12]]
    assert K.linear_bwd_in_acc(e, w, "int").tolist() == [[1, -2, -5]]
    assert K.linear_bwd_w_acc(x, e, "int").tolist() == [[3, 6, 9], [-1, -2, -3]]
    assert K.bias_grad_acc(e, "int").tolist() == [3, -1]


def test_sequential_float_order():
    a = np.array([[1e8, 1.0, -1e8, 1.0]], np.float32)
    b = np.ones((4, 1), np.float32)
    # ((0 + 1e8) + 1) - 1e8 + 1 in float32: the 1 is lost in the first sum, kept in the last
    assert K.matmul_seq(a, b)[0, 0] == np.float32(1.0)
    assert K.seq_sum(a, 1)[0] == np.float32(1.0)
    neg = np.full((1, 3), -0.0, np.float32)
    assert np.signbit(K.seq_sum(neg, 1)[0]) == np.False_     # a C loop from +0.0 ends at +0.0
    assert not np.signbit(K.seq_sum(np.full((3, 2), -0.0, np.float32), 1)).any()


@pytest.mark.parametrize("shape,axis", [((7, 300), 1), ((300, 7), 0), ((2, 1000), 1), ((4, 257, 3), 1),
                                        ((1, 1000), 1), ((1000,), 0)])
def test_seq_sum_is_the_c_loop(shape, axis):
    """Many outputs (an outer-axis reduce) or one (accumulate): both the plain sequential loop."""
    rng = np.random.default_rng(10)
    a = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 8, shape)).astype(np.float32)
    moved = np.moveaxis(a, axis, -1).reshape(-1, a.shape[axis])
    want = []
    for row in moved:                                     # the C loop, one float32 rounding per addition
        acc = np.float32(0)
        for v in row:
            acc = np.float32(acc + v)
        want.append(acc)
    got = K.seq_sum(a, axis)
    assert got.dtype == np.float32 and np.array_equal(got.reshape(-1), np.array(want, np.float32))


def test_requant_f32_floor():
    got = K.requant_f32_floor(np.array([10, -10, 3]), np.float32(0.25), 5, 0, 255)
    assert got.tolist() == [7, 2, 5]     # floor(2.5) + 5, floor(-2.5) + 5, floor(0.75) + 5
    assert K.f32_multiplier(np.float32(0.5), np.float32(0.25), np.float32(0.5)) == np.float32(0.25)


@pytest.mark.parametrize("shape,kernel,stride", [((2, 4, 6, 3), (2, 2), (2, 2)),
                                                 ((2, 5, 5, 3), (3, 3), (2, 2)),
                                                 ((1, 5, 4, 2), (2, 2), (2, 2))])
def test_maxpool_first_max_and_routing(shape, kernel, stride):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, shape).astype(np.uint8)       # many ties: the first maximum must win
    y, arg = POOL.maxpool_fwd(x, kernel, stride)
    n, c = shape[0], shape[3]
    ho, wo = y.shape[1:3]
    for b in range(n):
        for i in range(ho):
            for j in range(wo):
                for ch in range(c):
                    win = [x[b, i * stride[0] + a, j * stride[1] + bb, ch]
                           for a in range(kernel[0]) for bb in range(kernel[1])]
                    assert y[b, i, j, ch] == max(win) and arg[b, i, j, ch] == int(np.argmax(win))
    e = rng.integers(-5, 6, y.shape).astype(np.int32)
    dx = POOL.maxpool_bwd(e, arg, shape, kernel, stride)
    assert int(dx.sum()) == int(e.sum()) and dx.dtype == np.int32


def test_modes_agree_on_small_integers(data):
    x, w = data
    xs, ws = (x % 7).astype(np.float32), (w % 5).astype(np.float32)
    a = K.conv2d_fwd_acc(xs, ws, (1, 1), (1, 1, 1, 1), 1, "int")
    b = K.conv2d_fwd_acc(xs, ws, (1, 1), (1, 1, 1, 1), 1, "f32seq")
    c = K.conv2d_fwd_acc(xs, ws, (1, 1), (1, 1, 1, 1), 1, "f32")
    assert np.array_equal(a, b) and np.array_equal(a, c)
    with pytest.raises(ValueError, match="unknown GEMM mode"):
        K.matmul(xs[0, 0], ws[0, 0], "f16")


# ---------------------------------------------------------------- fast paths equal the reference rule


def test_channel_extremes_and_sums():
    rng = np.random.default_rng(5)
    for shape in ((7, 3), (64, 5), (32, 28, 28, 16), (3, 1)):
        a = rng.integers(-1000, 1000, shape).astype(np.int32)
        mn, mx = K.channel_extremes(a)
        a2 = a.reshape(-1, shape[-1])
        assert np.array_equal(mn, a2.min(0)) and np.array_equal(mx, a2.max(0))
        assert np.array_equal(K.channel_sum(a, np.int64), a2.sum(0, dtype=np.int64))
    assert K.bias_grad_acc(np.array([[[1, -2]], [[3, 4]]], np.int32), "int").tolist() == [4, 2]


def test_int_float_mode_is_exact_in_a_float_dtype(data):
    x, w = data
    e = np.random.default_rng(6).integers(-127, 128, (2, 3, 3, 4)).astype(np.int32)
    geo = ((2, 2), (1, 1, 1, 1), 1)
    pairs = ((K.conv2d_fwd_acc(x, w, *geo, "int"), K.conv2d_fwd_acc(x, w, *geo, "int-float", 255)),
             (K.conv2d_bwd_in_acc(e, w, x.shape, *geo, "int"),
              K.conv2d_bwd_in_acc(e, w, x.shape, *geo, "int-float", 127)),
             (K.conv2d_bwd_w_acc(x, e, w.shape, *geo, "int"),
              K.conv2d_bwd_w_acc(x, e, w.shape, *geo, "int-float", False, 255, 127)))
    for want, got in pairs:
        assert want.dtype == np.int64 and got.dtype.kind == "f" and np.array_equal(got, want)


def test_transposed_conv_per_tap_equals_col2im():
    """The per-tap transposed conv (integer modes) against col2im of one GEMM, odd shapes and strides."""
    from mcutrain.engines.im2col import col2im
    rng = np.random.default_rng(7)
    for in_shape, k, stride, pad in (((2, 7, 6, 3), (3, 3), (2, 2), (1, 0, 2, 1)),
                                     ((1, 5, 5, 2), (2, 3), (1, 2), (0, 1, 1, 1))):
        w = rng.integers(-127, 128, (4, *k, in_shape[3])).astype(np.int32)
        ho = (in_shape[1] + pad[0] + pad[1] - k[0]) // stride[0] + 1
        wo = (in_shape[2] + pad[2] + pad[3] - k[1]) // stride[1] + 1
        e = rng.integers(-32512, 32513, (in_shape[0], ho, wo, 4)).astype(np.int16)
        e[0, 0, 0] = [32512, -32512, 32512, 32512]          # one row at the float64 data bound
        sparse = np.where(rng.random(e.shape) < 0.3, e, 0).astype(np.int16)
        sparse[0, 0, 0] = [32512, 32512, 0, 0]              # row sums <= 2^16: the float32 path
        for ee in (e, sparse):
            want = col2im((ee.reshape(-1, 4).astype(np.int64) @ w.reshape(4, -1)).astype(np.float64),
                          in_shape, k, stride, pad).astype(np.int64)
            assert np.array_equal(K.conv2d_bwd_in_acc(ee, w, in_shape, stride, pad, 1, "int", 1 << 15), want)
    # the dtype the data bound picks: float32 only when every row's |e| sum times max|w| <= 2^24
    w = np.full((8, 1), 127, np.int32)                      # shape bound 8 * 2^15 * 127 > 2^24
    assert K._rows_for_exact_gemm(np.full((2, 8), 32512, np.int16), w, 1 << 15)[1] == np.float64
    assert K._rows_for_exact_gemm(np.array([[32512, 100, 0, 0, 0, 0, 0, 0]], np.int16), w, 1 << 15)[1] \
        == np.float32


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_byte_maxpool_and_integer_routing_match_the_general_path(dtype):
    rng = np.random.default_rng(8)
    x = rng.integers(0, 3, (3, 6, 5, 4)).astype(dtype)        # ties everywhere
    y, arg = POOL.maxpool_fwd(x, (2, 2), (2, 2))
    x16 = x.astype(np.int16)                                   # not a byte type: the general path
    y2, arg2 = POOL.maxpool_fwd(x16, (2, 2), (2, 2))
    assert np.array_equal(y, y2) and np.array_equal(arg, arg2) and y.dtype == dtype
    e = rng.integers(-127, 128, y.shape).astype(np.int32)
    got = POOL.maxpool_bwd(e, arg, x.shape, (2, 2), (2, 2))
    want = POOL.maxpool_bwd(e.astype(np.float32), arg, x.shape, (2, 2), (2, 2))   # the select path
    assert got.dtype == np.int32 and np.array_equal(got, want.astype(np.int32))


def test_uint8_per_sample_gradient_helpers():
    """The batch sum of per-sample floor-quantized gradients and the outer-product range, without copies."""
    rng = np.random.default_rng(9)
    e = rng.integers(-255, 256, (5, 7)).astype(np.int32)
    x = rng.integers(-255, 256, (5, 11)).astype(np.int32)
    g = (e[:, :, None] * x[:, None, :]).astype(np.float32)          # (N, O, I), exact
    m, z = np.float32(0.0037), 131
    want = (K.requant_f32_floor(g, m, z, 0, 255).astype(np.int64) - z).sum(0)
    got = K.requant_f32_floor_batch_sum(g.copy(), m, z, 0, 255, overwrite=True)
    assert got.dtype == np.float64 and np.array_equal(got, want)
    kept = g.copy()
    K.requant_f32_floor_batch_sum(kept, m, z, 0, 255)
    assert np.array_equal(kept, g)                                   # not overwritten unless asked
    assert K.outer_range(e, x) == (float(g.min()), float(g.max()))


@pytest.mark.parametrize("kernel,stride", [((2, 2), (2, 2)), ((3, 3), (2, 2))])
def test_float_maxpool_first_max_and_signed_zero_routing(kernel, stride):
    """float32: the first maximum wins (+0.0 and -0.0 tie); routing keeps a routed -0.0, drops to +0.0."""
    rng = np.random.default_rng(11)
    x = rng.integers(-1, 2, (2, 6, 6, 3)).astype(np.float32) * np.float32(0.5)
    x[0, 0, 0, 0], x[0, 0, 1, 0] = -0.0, 0.0                  # a signed-zero tie in the first window
    y, arg = POOL.maxpool_fwd(x, kernel, stride)
    n, ho, wo, c = y.shape
    for b in range(n):
        for i in range(ho):
            for j in range(wo):
                for ch in range(c):
                    win = [x[b, i * stride[0] + a, j * stride[1] + bb, ch]
                           for a in range(kernel[0]) for bb in range(kernel[1])]
                    first = next(t for t, v in enumerate(win) if v == max(win))
                    assert arg[b, i, j, ch] == first
                    assert y[b, i, j, ch].tobytes() == win[first].tobytes()
    e = rng.standard_normal(y.shape).astype(np.float32)
    e[0, 0, 0, 0] = -0.0
    dx = POOL.maxpool_bwd(e, arg, x.shape, kernel, stride)
    tiled = kernel == stride
    want = np.zeros(x.shape, np.float32)
    for b, i, j, ch in np.ndindex(*y.shape):
        a, bb = divmod(int(arg[b, i, j, ch]), kernel[1])
        at = (b, i * stride[0] + a, j * stride[1] + bb, ch)
        # non-overlapping windows store the routed error; overlapping ones add it to +0.0
        want[at] = e[b, i, j, ch] if tiled else want[at] + e[b, i, j, ch]
    assert np.array_equal(dx.view(np.int32), want.view(np.int32))   # bit for bit, zeros' signs too
    assert np.signbit(dx).sum() == np.signbit(want).sum()


def test_select_is_where_bit_for_bit():
    a = np.array([-1.5, -0.0, 0.0, 2.0, -3.0], np.float32)
    keep = np.array([True, True, False, False, True])
    got = POOL.select(a, keep)
    assert got.dtype == np.float32 and got.view(np.int32).tolist() == np.where(keep, a, 0).astype(
        np.float32).view(np.int32).tolist()
    assert POOL.select(np.array([5, -7], np.int16), np.array([False, True])).tolist() == [0, -7]


def _depthwise_taps_int64(x, e, kernel, stride, pad):
    """Reference tap sums in int64: per-sample weight gradients (N, C, kh, kw, 1) and the input
    error of a depthwise conv (one output channel per input channel), loops over taps only."""
    n, h, wd, c = x.shape
    ho, wo = e.shape[1:3]
    pt, pb, pl, pr = pad
    xp = np.zeros((n, h + pt + pb, wd + pl + pr, c), np.int64)
    xp[:, pt:pt + h, pl:pl + wd] = x
    gw = np.zeros((n, c, *kernel, 1), np.int64)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            v = xp[:, i:i + stride[0] * ho:stride[0], j:j + stride[1] * wo:stride[1]]
            gw[:, :, i, j, 0] = (v * e.astype(np.int64)).sum((1, 2))
    return gw


@pytest.mark.parametrize("mode", ["int", "int-float"])
@pytest.mark.parametrize("stride, pad", [((1, 1), (1, 1, 1, 1)), ((2, 2), (0, 1, 0, 1))])
def test_depthwise_weight_gradient_in_float32_chunks_is_exact_at_the_extremes(mode, stride, pad):
    """8-bit extremes (|x| 255, |e| 127) over 4096 positions per sample: past float32's whole-sum
    bound, so the chunked float32 path runs; its integers are the int64 tap loop's."""
    rng = np.random.default_rng(7)
    n, c = 3, 5
    h = 64 * stride[0]
    x = rng.choice([-255, 255, 254, -1, 0], (n, h, h, c)).astype(np.float32)
    ho = (h + pad[0] + pad[1] - 3) // stride[0] + 1
    e = rng.choice([-127, 127, 126, 0], (n, ho, ho, c)).astype(np.int16)
    assert 64 * 64 * 255 * 127 > 1 << 24 and K.split_k_chunk(ho * ho, 255, 127) >= K.MIN_TAP_CHUNK
    want = _depthwise_taps_int64(x.astype(np.int64), e, (3, 3), stride, pad)
    per = K.conv2d_bwd_w_acc(x, e, (c, 3, 3, 1), stride, pad, c, mode, per_sample=True, x_max=255, e_max=127)
    total = K.conv2d_bwd_w_acc(x, e, (c, 3, 3, 1), stride, pad, c, mode, x_max=255, e_max=127)
    assert np.array_equal(per.astype(np.int64), want) and np.array_equal(per, want)
    assert np.array_equal(total, want.sum(0))
    assert (per.dtype == np.int64) == (mode == "int")


@pytest.mark.parametrize("stride, mult", [((1, 1), 1), ((2, 2), 1), ((1, 1), 2)])
def test_depthwise_input_error_in_float32_tap_runs_is_exact_at_the_extremes(stride, mult):
    """int16 errors at +-32767 with weights at +-127: nine taps pass float32's bound, runs of four
    sum in float32 first; the result equals the adjoint of the int64 forward tap loop."""
    rng = np.random.default_rng(8)
    n, c, h = 2, 3, 9
    o = c * mult
    pad = (1, 1, 1, 1)
    w = rng.choice([-127, 127, 100], (o, 3, 3, 1)).astype(np.float32)
    ho = (h + 2 - 3) // stride[0] + 1
    e = rng.choice([-32767, 32767, 32766, 0], (n, ho, ho, o)).astype(np.int16)
    got = K.conv2d_bwd_in_acc(e, w, (n, h, h, c), stride, pad, c, "int-float", e_max=32768)
    want = np.zeros((n, h, h, c), np.int64)          # adjoint: <conv(x), e> = <x, dx> per unit x
    for k in range(h * h * c):
        x = np.zeros(h * h * c, np.int64)
        x[k] = 1
        xs = np.broadcast_to(x.reshape(1, h, h, c), (n, h, h, c))
        xs = np.repeat(xs, mult, axis=3) if mult > 1 else xs
        y = K.conv2d_fwd_acc(xs.astype(np.float32), w, stride, pad, o, "int")  # (n, ho, ho, o)
        want.reshape(n, -1)[:, k] = (y * e.astype(np.int64)).sum((1, 2, 3))
    assert 9 * 32767 * 127 > 1 << 24 and got.dtype.kind == "f"
    assert np.array_equal(got.astype(np.int64), want) and np.array_equal(got, want)


@pytest.mark.parametrize("mode", ["int", "int-float"])
def test_pointwise_input_error_picks_float32_by_the_rows_and_stays_exact(mode):
    """int16 errors, one large value per row (the data bound allows float32) or every value at
    +-32767 (it does not: float64): both equal the int64 product."""
    rng = np.random.default_rng(9)
    n, hw, c, o = 2, 6, 24, 48
    w = rng.choice([-127, 127, 3], (o, 1, 1, c)).astype(np.float32)
    sparse = rng.integers(-9, 10, (n, hw, hw, o)).astype(np.int16)
    sparse[..., 0] = 32767
    dense = rng.choice([-32767, 32767], (n, hw, hw, o)).astype(np.int16)
    for e in (sparse, dense):
        got = K.conv2d_bwd_in_acc(e, w, (n, hw, hw, c), (1, 1), (0, 0, 0, 0), 1, mode, e_max=32768)
        want = e.reshape(-1, o).astype(np.int64) @ w.reshape(o, c).astype(np.int64)
        assert np.array_equal(got.reshape(-1, c).astype(np.int64), want)
        assert got.dtype.kind == ("i" if mode == "int" else "f")
    assert K.conv2d_bwd_in_acc(sparse, w, (n, hw, hw, c), (1, 1), (0, 0, 0, 0), 1, "int-float",
                               e_max=32768).dtype == np.float32
    assert K.conv2d_bwd_in_acc(dense, w, (n, hw, hw, c), (1, 1), (0, 0, 0, 0), 1, "int-float",
                               e_max=32768).dtype == np.float64
