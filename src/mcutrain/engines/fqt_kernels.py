"""FQT kernels: forward with kept tensors, error propagation, weight gradients, in three number formats.

Each function is the Python twin of a C kernel of the same name
(`mt_conv2d_bwd_in_u8` in C is `conv2d_bwd_in_acc` + `requant_f32_floor` here).
Kernels work on *centred* operands: `x - z_x`, `w - z_w`, `e - z_e` as int32
for the 8-bit formats, plain float32 values for the float formats; padding is
therefore always 0 (= real 0). They return accumulators; the caller picks the
requantization of its precision:

- `requant_f32_floor`: seed A's float requantization, `clamp(floor(float32(acc) * M) + z)`
  with `M` one float32 per tensor (uint8 precision).
- `quant.fixedpoint.requantize_output`: the fixed-point rule of the int8 format.
- float32 values: no requantization.

Summation order (docs/integer-semantics.md, "FQT training operations"):
integer accumulations are exact in any order, so they run through float BLAS
when `int_gemm` proves it exact. float32 sums have a defined order only in
mode `"f32seq"`: every dot product is accumulated from +0.0 in increasing
index order (k of the OHWI/(O, I) weight row for forward, output channel o
for error propagation, positions p then samples b for weight gradients), each
product and sum rounded to float32 — what a plain C loop compiled with
`-ffp-contract=off` does. Mode `"f32"` uses BLAS (same formula, unspecified
order) and is the fast path for experiments.

Example:
    >>> x = np.arange(8, dtype=np.int32).reshape(2, 4)
    >>> w = np.ones((3, 4), np.int32)
    >>> linear_fwd_acc(x, w, "int").tolist()
    [[6, 6, 6], [22, 22, 22]]
"""

from __future__ import annotations

import numpy as np

from mcutrain.engines.im2col import col2im, im2col, out_size, pad_nhwc, tap_views
from mcutrain.engines.int_gemm import (
    F32_EXACT,
    F64_EXACT,
    exact_matmul,
    exact_matmul_split_k,
    gemm_dtype,
    split_k_chunk,
)

MODES = ("int", "int-float", "f32", "f32seq")
"""GEMM modes: exact integers (as int64, or "int-float": left in the exact float dtype the bound
allows, which spares a conversion pass), float32 BLAS, float32 in the defined sequential order."""
INT_MODES = ("int", "int-float")
MIN_TAP_CHUNK = 16
"""Shortest run of positions a depthwise weight gradient sums in float32 before float64 takes over
(shorter chunks leave the float64 pass as long as the float32 one)."""


# ---------------------------------------------------------------- GEMM in a chosen mode


def abs_max(a: np.ndarray) -> int:
    """The largest |value| of an integer array (0 when empty): what the exact-GEMM bounds need."""
    return int(max(a.max(), -a.min())) if a.size else 0


def _bound(a: np.ndarray, b: np.ndarray, a_max: int | None = None, b_max: int | None = None) -> int:
    """Shape bound on every partial sum of a @ b: K * max|a| * max|b| (exactness of float BLAS).

    `a_max` / `b_max` are known bounds of |a| / |b| from their number format (e.g. 255 for a
    centred 8-bit tensor); they spare a pass over large operands.
    """
    if a.size == 0 or b.size == 0:
        return 0
    am = abs_max(a) if a_max is None else a_max
    bm = abs_max(b) if b_max is None else b_max
    return int(a.shape[-1]) * am * bm


def matmul_seq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float32 a (..., M, K) @ b (..., K, N) summed from +0.0 in increasing k, rounding each step.

    NOTE: a loop over the reduction index only; each iteration is one
    vectorized multiply-add over all outputs, so it is the C loop order
    without a Python loop over elements.
    """
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    shape = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
    out = np.zeros(shape, np.float32)
    tmp = np.empty(shape, np.float32)
    for k in range(a.shape[-1]):
        np.multiply(a[..., :, k:k + 1], b[..., k:k + 1, :], out=tmp)
        out += tmp
    return out


def matmul(a: np.ndarray, b: np.ndarray, mode: str, a_max: int | None = None,
           b_max: int | None = None) -> np.ndarray:
    """a @ b in `mode`: int64 exactly ("int"), float32 BLAS ("f32"), float32 ordered ("f32seq")."""
    if mode == "int":
        return exact_matmul(a, b, _bound(a, b, a_max, b_max))
    if mode == "int-float":     # exact integers left in the float dtype int_gemm picked
        dt = gemm_dtype(_bound(a, b, a_max, b_max))
        return np.matmul(a.astype(dt, copy=False), b.astype(dt, copy=False))
    if mode == "f32":
        return np.matmul(a.astype(np.float32, copy=False), b.astype(np.float32, copy=False))
    if mode == "f32seq":
        return matmul_seq(a, b)
    raise ValueError(f"unknown GEMM mode {mode!r}; use one of {', '.join(MODES)}")


def seq_sum(a: np.ndarray, axis: int) -> np.ndarray:
    """float32 sum over `axis` from +0.0 in increasing index order, rounding after every addition."""
    a = np.asarray(a, np.float32)
    if a.shape[axis] == 0:
        return np.zeros(np.delete(a.shape, axis), np.float32)
    n = a.shape[axis]
    rest = a.size // n
    # NOTE: "+ 0" turns a -0.0 result into the +0.0 a C loop starting from 0.0f gives.
    if rest >= 2:
        # numpy documents that a sum along an axis other than the fast (contiguous) one adds each
        # number to the result in turn (pairwise blocks only along the fast axis): with the summed
        # axis outermost in a C-contiguous copy, each output is a[0] + a[1] + ... in index order.
        front = np.ascontiguousarray(np.moveaxis(a, axis, 0)).reshape(n, rest)
        total = np.add.reduce(front, axis=0)
        return (total + np.float32(0)).astype(np.float32).reshape(np.delete(a.shape, axis))
    # one output: ufunc.accumulate is a strictly sequential loop (out[i] = out[i-1] + a[i], rounded
    # to float32), unlike reduce along the fast axis, which sums pairwise
    last = np.take(np.add.accumulate(a, axis=axis), -1, axis=axis)
    return (last + np.float32(0)).astype(np.float32)


def acc_dtype(mode: str) -> type:
    return np.int64 if mode in INT_MODES else np.float32


def tap_dtype(mode: str, terms: int, a_max: int, b_max: int) -> np.dtype:
    """Accumulator dtype of a depthwise tap loop: float32 for the float modes; for the integer
    modes the cheapest exact one for `terms` products of |a| <= a_max, |b| <= b_max (every
    partial sum is at most terms * a_max * b_max: e.g. 3x3 taps, 9 * 255 * 127 < 2^24 is float32)."""
    if mode not in INT_MODES:
        return np.dtype(np.float32)
    return gemm_dtype(terms * a_max * b_max)


def _as_mode(acc: np.ndarray, mode: str) -> np.ndarray:
    """Exact integers in a float dtype as the mode returns them: int64 for "int", as they are else."""
    return acc.astype(np.int64) if mode == "int" and acc.dtype.kind == "f" else acc


# ---------------------------------------------------------------- requantization


def requant_f32_floor(acc: np.ndarray, m: np.float32, zero_point: int, lo: int, hi: int) -> np.ndarray:
    """Seed A's requantization: `clamp(floor(float32(acc) * M) + z, lo, hi)`, M one float32.

    `float32(acc)` is the IEEE conversion (round to nearest even; exact below 2^24).
    Returns int32 values in [lo, hi]; the caller stores them as uint8.
    """
    v = acc.astype(np.float32)                 # a fresh buffer unless acc is float32 already
    if v is acc:
        v = v.copy()
    with np.errstate(over="ignore"):          # inf saturates in the clamp below, as in C
        np.multiply(v, np.float32(m), out=v)
    np.floor(v, out=v)
    v += np.float32(zero_point)
    np.clip(v, lo, hi, out=v)
    return v.astype(np.int32)


def channel_extremes(acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (last axis) min and max of `acc`, in its dtype.

    NOTE: a min over axis 0 of a (rows, C) array with few channels runs one short
    row at a time; folding 2^j rows into each row first (a free reshape) makes the
    reduction run over long rows, about 4x faster. Exact in any order.
    """
    c = acc.shape[-1]
    wide, k = _fold_rows(acc.reshape(-1, c))
    return wide.min(0).reshape(k, c).min(0), wide.max(0).reshape(k, c).max(0)


def _fold_rows(a2: np.ndarray) -> tuple[np.ndarray, int]:
    """(rows, C) -> (rows / k, k * C) with k a power of two, rows of up to 1024 values (a free reshape)."""
    rows, c = a2.shape
    k = 1
    while rows % (2 * k) == 0 and 2 * k * c <= 1024:
        k *= 2
    return a2.reshape(rows // k, k * c), k


def channel_sum(a: np.ndarray, dtype: type) -> np.ndarray:
    """Per-channel (last axis) sum of integers in `dtype`, in any order (exact; `_fold_rows` for speed)."""
    c = a.shape[-1]
    wide, k = _fold_rows(a.reshape(-1, c))
    return wide.sum(0, dtype=dtype).reshape(k, c).sum(0, dtype=dtype)


def requant_f32_floor_batch_sum(acc: np.ndarray, m: np.float32, zero_point: int, lo: int, hi: int,
                                overwrite: bool = False) -> np.ndarray:
    """`sum_b (requant_f32_floor(acc)[b] - z)` over axis 0, as exact integers in float64.

    The seed's per-sample gradient buffer without int32 copies: the quantized values
    are integers in [lo, hi] held in float32, so their batch sum is exact in float64 in
    any order. `overwrite` lets a float32 `acc` the caller owns be the work buffer.
    """
    v = acc if overwrite and acc.dtype == np.float32 else acc.astype(np.float32)
    if v is acc and not overwrite:
        v = v.copy()
    with np.errstate(over="ignore"):          # inf saturates in the clamp below, as in C
        np.multiply(v, np.float32(m), out=v)
    np.floor(v, out=v)
    np.clip(v, lo - zero_point, hi - zero_point, out=v)     # = clamp(floor + z, lo, hi) - z: integers
    return v.sum(0, dtype=np.float64)


def outer_range(ec: np.ndarray, xc: np.ndarray) -> tuple[float, float]:
    """(min, max) over b, o, i of the per-sample outer products e[b, o] * x[b, i], not formed.

    The extremes of a product of two sets are products of their extremes, so four
    candidates per sample give them exactly (integer operands: float64 products exact).
    """
    if ec.size == 0 or xc.size == 0:
        return 0.0, 0.0
    e = ec.reshape(len(ec), -1).astype(np.float64)
    x = xc.reshape(len(xc), -1).astype(np.float64)
    ends = [a[:, None] * c[:, None] for a in (e.min(1), e.max(1)) for c in (x.min(1), x.max(1))]
    cand = np.concatenate(ends, axis=1)
    return float(cand.min()), float(cand.max())


def f32_multiplier(sa: np.float32, sb: np.float32, s_out: np.float32) -> np.float32:
    """`M = (s_a * s_b) / s_out`, float32, once per tensor, in that order."""
    return np.float32(np.float32(np.float32(sa) * np.float32(sb)) / np.float32(s_out))


def act_f32(z: np.ndarray, act: str) -> np.ndarray:
    """Fused activation of a float32 accumulator (relu: max(z, 0); relu6: min(max(z, 0), 6))."""
    if act == "relu":
        return np.maximum(z, np.float32(0)).astype(np.float32)
    if act == "relu6":
        return np.clip(z, np.float32(0), np.float32(6)).astype(np.float32)
    return np.asarray(z, np.float32)


# ---------------------------------------------------------------- conv2d


def conv2d_fwd_acc(xc: np.ndarray, wc: np.ndarray, stride: tuple[int, int],
                   padding: tuple[int, int, int, int], groups: int, mode: str,
                   x_max: int | None = None, keep: dict | None = None) -> np.ndarray:
    """Accumulators (N, Ho, Wo, O) of a conv over centred NHWC input and centred OHWI weights.

    Dense and grouped convs are im2col + GEMM over k = (i, j, c); depthwise
    convs (one input channel per group) sum the taps in (i, j) order. With
    `keep`, the im2col matrix is left in `keep["cols"]` for the weight gradient
    (a host-side cache of a function of the kept input, not a tensor of the schedule).
    """
    n, h, w, c = xc.shape
    o, kh, kw, cig = wc.shape
    ho = out_size(h, kh, stride[0], padding[0] + padding[1])
    wo = out_size(w, kw, stride[1], padding[2] + padding[3])
    if groups > 1 and cig == 1:
        m = o // c
        xp = pad_nhwc(np.repeat(xc, m, axis=3) if m > 1 else xc, padding, 0)
        dt = tap_dtype(mode, kh * kw, abs_max(xc) if x_max is None else x_max, abs_max(wc))
        acc = np.zeros((n, ho, wo, o), dt)
        tmp = np.empty_like(acc)
        wt = wc.astype(dt)
        for i, j, view in tap_views(xp, (kh, kw), stride, (ho, wo)):
            np.multiply(view, wt[:, i, j, 0], out=tmp, dtype=dt, casting="unsafe")   # exact values
            acc += tmp
        return _as_mode(acc, mode)
    cols = im2col(xc, (kh, kw), stride, padding, 0)
    if keep is not None:
        keep["cols"] = cols
    if groups == 1:
        acc = matmul(cols, wc.reshape(o, -1).T, mode, x_max)
    else:
        mrows, opg = cols.shape[0], o // groups
        cg = cols.reshape(mrows, kh * kw, groups, cig).transpose(2, 0, 1, 3).reshape(groups, mrows, -1)
        wg = wc.reshape(groups, opg, kh * kw * cig).transpose(0, 2, 1)
        acc = matmul(cg, wg, mode, x_max).transpose(1, 0, 2).reshape(mrows, o)
    return acc.reshape(n, ho, wo, o)


def _rows_for_exact_gemm(e2: np.ndarray, wc: np.ndarray, e_max: int | None) -> tuple[np.ndarray, np.dtype]:
    """`e2` (rows, O) in the cheapest float dtype in which `e2 @ w[:, k]` is exact, and that dtype.

    Besides the shape bound O * max|e| * max|w| (`_bound`), the data bound
    max_p sum_o |e[p, o]| * max|w| often allows float32 for prescaled int8 errors
    (16-bit values, but few large ones per row): every partial sum of a row's dot
    product is at most that. The row sums are exact float32 (O * max|e| <= 2^24).
    """
    bound = _bound(e2, wc, e_max)
    if bound <= F32_EXACT or e2.size == 0:
        return e2.astype(np.float32, copy=False), np.dtype(np.float32)
    em = abs_max(e2) if e_max is None else e_max
    if e2.shape[1] * em <= F32_EXACT:
        ef = e2.astype(np.float32, copy=False)
        row_l1 = np.abs(ef) @ np.ones(e2.shape[1], np.float32)      # exact: sums below 2^24
        if int(row_l1.max()) * abs_max(wc) <= F32_EXACT:
            return ef, np.dtype(np.float32)
    gd = gemm_dtype(bound)
    return e2.astype(gd, copy=False), gd


def conv2d_bwd_in_acc(ec: np.ndarray, wc: np.ndarray, in_shape: tuple[int, int, int, int],
                      stride: tuple[int, int], padding: tuple[int, int, int, int], groups: int,
                      mode: str, e_max: int | None = None) -> np.ndarray:
    """Transposed conv: accumulators (N, H, W, C) of the input error from centred output errors.

    Per input element: the sum over taps (i, j) in order of the sum over
    output channels o in order of e[o] * w[o, i, j, c] (col2im adds the taps).
    """
    n, h, w, c = in_shape
    o, kh, kw, cig = wc.shape
    dt = acc_dtype(mode)
    if groups > 1 and cig == 1:
        m = o // c
        pt, pb, pl, pr = padding
        ho, wo = ec.shape[1:3]
        # NOTE: an input element gets at most ceil(kh/s0) * ceil(kw/s1) tap products (kh * kw at
        # stride 1), and m of them are summed per channel; the data's own max|e| often proves
        # float32 exact where the format's bound e_max does not (one pass over e, not kh * kw)
        terms = -(-kh // stride[0]) * -(-kw // stride[1]) * m
        wm = abs_max(wc)
        em = abs_max(ec) if e_max is None or terms * e_max * wm > F32_EXACT else e_max
        dt = tap_dtype(mode, terms, em, wm)
        dxp = np.zeros((n, h + pt + pb, w + pl + pr, o), dt)
        # NOTE: past float32's bound, runs of `run` taps still sum exactly in float32 (an element
        # gets one product per tap: run * max|e| * max|w| <= 2^24), then join dxp in float64
        run = F32_EXACT // max(em * wm, 1) if mode in INT_MODES and dt != np.float32 else 0
        acc = np.zeros(dxp.shape, np.float32) if run >= 2 else dxp
        wt = wc.astype(acc.dtype)
        e = ec.astype(acc.dtype)
        tmp = np.empty_like(e)
        for k, (i, j, view) in enumerate(tap_views(acc, (kh, kw), stride, (ho, wo))):
            np.multiply(e, wt[:, i, j, 0], out=tmp)
            view += tmp
            if acc is not dxp and ((k + 1) % run == 0 or k + 1 == kh * kw):
                dxp += acc
                acc.fill(0)
        dx = dxp[:, pt:pt + h, pl:pl + w, :]
        if m > 1:
            d5 = dx.reshape(n, h, w, c, m)
            dx = d5.sum(-1) if mode in INT_MODES else seq_sum(d5, 4)
        return _as_mode(np.ascontiguousarray(dx), mode)
    e2 = ec.reshape(-1, o)
    gm = "int-float" if mode in INT_MODES else mode
    if groups == 1 and mode in INT_MODES and (kh, kw) != (1, 1):
        # NOTE: one GEMM per tap added straight into the padded input (exact in any order):
        # the (N*P, kh*kw*C) column matrix of col2im is never written, about 1.5x faster.
        pt, pb, pl, pr = padding
        e2, gd = _rows_for_exact_gemm(e2, wc, e_max)
        wt = wc.astype(gd, copy=False)
        dxp = np.zeros((n, h + pt + pb, w + pl + pr, c), np.float64)
        for i, j, view in tap_views(dxp, (kh, kw), stride, ec.shape[1:3]):
            view += np.matmul(e2, wt[:, i, j, :]).reshape(view.shape)
        dx = dxp[:, pt:pt + h, pl:pl + w, :]
        return dx.astype(np.int64) if mode == "int" else dx
    if groups == 1 and mode in INT_MODES and (kh, kw) == (1, 1):
        e2, gd = _rows_for_exact_gemm(e2, wc, e_max)   # NOTE: the data bound: float32 for most
        dcols = np.matmul(e2, wc.reshape(o, -1).astype(gd, copy=False))
    elif groups == 1:
        dcols = matmul(e2, wc.reshape(o, -1), gm, e_max)
    else:
        opg = o // groups
        eg = e2.reshape(-1, groups, opg).transpose(1, 0, 2)
        wg = wc.reshape(groups, opg, kh * kw * cig)
        dg = matmul(eg, wg, gm, e_max)
        dcols = dg.reshape(groups, -1, kh * kw, cig).transpose(1, 2, 0, 3).reshape(e2.shape[0], -1)
    if (kh, kw) == (1, 1) and tuple(stride) == (1, 1) and not any(padding):
        # NOTE: a pointwise conv's input error is the GEMM itself (no taps to add): exact as the
        # GEMM left it, so no float64 copy and no col2im copy
        return _as_mode(dcols.reshape(in_shape), mode)
    if mode in INT_MODES:   # NOTE: exact: |dcols| * kh * kw < 2^53 for every int32-bounded accumulator
        dx = col2im(dcols.astype(np.float64, copy=False), in_shape, (kh, kw), stride, padding)
        return dx.astype(np.int64) if mode == "int" else dx
    return col2im(dcols.astype(dt, copy=False), in_shape, (kh, kw), stride, padding)


def conv2d_bwd_w_acc(xc: np.ndarray, ec: np.ndarray, w_shape: tuple[int, ...],
                     stride: tuple[int, int], padding: tuple[int, int, int, int], groups: int,
                     mode: str, per_sample: bool = False, x_max: int | None = None,
                     e_max: int | None = None, cols: np.ndarray | None = None) -> np.ndarray:
    """Weight-gradient accumulators from stored centred inputs and centred output errors.

    Returns (O, kh, kw, cig), or (N, O, kh, kw, cig) with `per_sample`. In
    `f32seq` each sample's sum runs over output positions in row-major order,
    and samples are added to the buffer in batch order.
    """
    n = xc.shape[0]
    o, kh, kw, cig = w_shape
    ho, wo = ec.shape[1:3]
    p = ho * wo
    if groups > 1 and cig == 1:
        m = o // xc.shape[3]
        xp = pad_nhwc(np.repeat(xc, m, axis=3) if m > 1 else xc, padding, 0)
        # one weight's gradient sums p products per sample, n * p over the batch
        xm = abs_max(xc) if x_max is None else x_max
        em = abs_max(ec) if e_max is None else e_max
        dt = tap_dtype(mode, n * p, xm, em)
        chunk = split_k_chunk(p, xm, em) if mode in INT_MODES and dt != np.float32 else 0
        if chunk >= MIN_TAP_CHUNK and n * p * xm * em <= F64_EXACT:
            out = _depthwise_bwd_w_chunked(xp, ec, w_shape, stride, (ho, wo), chunk)
            out = _as_mode(out, mode)
            return out if per_sample else _batch_sum(out, mode)
        out = np.zeros((n, o, kh, kw, 1), dt)
        e = ec.astype(dt)
        prod = np.empty((n, ho, wo, o), dt)
        for i, j, view in tap_views(xp, (kh, kw), stride, (ho, wo)):
            np.multiply(view, e, out=prod, dtype=dt, casting="unsafe")     # exact values
            p3 = prod.reshape(n, p, o)
            out[:, :, i, j, 0] = seq_sum(p3, 1) if mode == "f32seq" else p3.sum(1)
        out = _as_mode(out, mode)
        return out if per_sample else _batch_sum(out, mode)
    if cols is None:
        cols = im2col(xc, (kh, kw), stride, padding, 0)      # (N*P, K)
    k = cols.shape[1]
    if groups == 1:
        e3 = ec.reshape(n, p, o).transpose(0, 2, 1)            # (N, O, P)
        c3 = cols.reshape(n, p, k)
        if per_sample or mode == "f32seq":
            g = matmul(e3, c3, mode, e_max, x_max)              # (N, O, K)
            return g.reshape(n, *w_shape) if per_sample else _batch_sum(g, mode).reshape(w_shape)
        if mode in INT_MODES and x_max is not None and e_max is not None:
            # exact in any order: (K, N*P) @ (N*P, O) reads both operands as stored, in float32 chunks
            g = exact_matmul_split_k(cols.T, ec.reshape(n * p, o), x_max, e_max).T.reshape(w_shape)
            return g.astype(np.int64) if mode == "int" else g
        return matmul(e3.transpose(1, 0, 2).reshape(o, n * p), cols, mode, e_max, x_max).reshape(w_shape)
    opg = o // groups
    cg = cols.reshape(n, p, kh * kw, groups, cig).transpose(0, 3, 1, 2, 4).reshape(n, groups, p, -1)
    eg = ec.reshape(n, p, groups, opg).transpose(0, 2, 3, 1)   # (N, G, O/G, P)
    g = matmul(eg, cg, mode, e_max, x_max).reshape(n, groups, opg, kh, kw, cig).reshape(n, *w_shape)
    return g if per_sample else _batch_sum(g, mode)


def _depthwise_bwd_w_chunked(xp: np.ndarray, ec: np.ndarray, w_shape: tuple[int, ...],
                             stride: tuple[int, int], out_hw: tuple[int, int], chunk: int) -> np.ndarray:
    """Per-sample depthwise weight-gradient accumulators (N, O, kh, kw, 1), exact, as float64.

    NOTE: `chunk` divides the P positions and chunk * max|x| * max|e| <= 2^24 (`split_k_chunk`):
    each product and each chunk's sum (every partial sum a sum of at most `chunk` products) is
    an exact float32, and float64 adds the P / chunk chunk sums exactly (the caller checks
    N * P * max|x| * max|e| <= 2^53): the integers of the int64 tap loop at float32 speed.
    """
    n, ho, wo, o = ec.shape
    kh, kw = w_shape[1:3]
    out = np.zeros((n, o, kh, kw, 1), np.float64)
    e = ec.astype(np.float32)
    prod = np.empty((n, ho, wo, o), np.float32)
    for i, j, view in tap_views(xp, (kh, kw), stride, out_hw):
        np.multiply(view, e, out=prod, dtype=np.float32, casting="unsafe")     # exact values
        part = prod.reshape(n, ho * wo // chunk, chunk, o).sum(2)
        out[:, :, i, j, 0] = part.sum(1, dtype=np.float64)
    return out


def _batch_sum(g: np.ndarray, mode: str) -> np.ndarray:
    """Gradient buffer over the batch: exact for integers, batch order for f32seq."""
    return seq_sum(g, 0) if mode == "f32seq" else g.sum(0)


# ---------------------------------------------------------------- linear


def linear_fwd_acc(xc: np.ndarray, wc: np.ndarray, mode: str, x_max: int | None = None) -> np.ndarray:
    """(N, I) centred inputs, (O, I) centred weights -> (N, O) accumulators."""
    return matmul(xc, wc.T, mode, x_max)


def linear_bwd_in_acc(ec: np.ndarray, wc: np.ndarray, mode: str, e_max: int | None = None) -> np.ndarray:
    """(N, O) centred errors -> (N, I): sum over o in order of e[o] * w[o, i]."""
    return matmul(ec, wc, mode, e_max)


def linear_bwd_w_acc(xc: np.ndarray, ec: np.ndarray, mode: str, per_sample: bool = False,
                     x_max: int | None = None, e_max: int | None = None) -> np.ndarray:
    """Outer products e[o] * x[i]: (O, I) summed over the batch, or (N, O, I) per sample."""
    if per_sample or mode == "f32seq":
        dt = acc_dtype(mode)
        if mode in INT_MODES and x_max is not None and e_max is not None and x_max * e_max <= 1 << 24:
            dt = np.float32                  # one product per element: exact in float32
        g = ec.astype(dt)[:, :, None] * xc.astype(dt)[:, None, :]
        return g if per_sample else _batch_sum(g, mode)
    return matmul(ec.T, xc, mode, e_max, x_max)


def bias_grad_acc(ec: np.ndarray, mode: str, per_sample: bool = False) -> np.ndarray:
    """Sum of centred errors over positions (per sample, then over the batch in order)."""
    n, o = ec.shape[0], ec.shape[-1]
    if mode in INT_MODES and not per_sample:      # exact in any order
        return channel_sum(ec, np.int64)
    e3 = ec.reshape(n, -1, o)
    g = seq_sum(e3, 1) if mode == "f32seq" else e3.sum(1, dtype=acc_dtype(mode))
    return g if per_sample else _batch_sum(g, mode)
