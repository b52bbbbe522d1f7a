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

from dataclasses import dataclass

import numpy as np

from mcutrain.engines.im2col import col2im, im2col, out_size, pad_nhwc, tap_views
from mcutrain.engines.int_gemm import (
    F32_EXACT,
    F64_EXACT,
    exact_matmul,
    exact_matmul_split_k,
    gemm_dtype,
)

MODES = ("int", "int-float", "f32", "f32seq")
"""GEMM modes: exact integers (as int64, or "int-float": left in the exact float dtype the bound
allows, which spares a conversion pass), float32 BLAS, float32 in the defined sequential order."""
INT_MODES = ("int", "int-float")


# ---------------------------------------------------------------- GEMM in a chosen mode


def _amax(a: np.ndarray) -> int:
    return int(max(a.max(), -a.min())) if a.size else 0


def _bound(a: np.ndarray, b: np.ndarray, a_max: int | None = None, b_max: int | None = None) -> int:
    """Shape bound on every partial sum of a @ b: K * max|a| * max|b| (exactness of float BLAS).

    `a_max` / `b_max` are known bounds of |a| / |b| from their number format (e.g. 255 for a
    centred 8-bit tensor); they spare a pass over large operands.
    """
    if a.size == 0 or b.size == 0:
        return 0
    am = _amax(a) if a_max is None else a_max
    bm = _amax(b) if b_max is None else b_max
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
        dt = acc_dtype(mode)
        acc = np.zeros((n, ho, wo, o), dt)
        wt = wc.astype(dt)
        for i, j, view in tap_views(xp, (kh, kw), stride, (ho, wo)):
            acc += view.astype(dt) * wt[:, i, j, 0]
        return acc
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
    em = _amax(e2) if e_max is None else e_max
    if e2.shape[1] * em <= F32_EXACT:
        ef = e2.astype(np.float32, copy=False)
        row_l1 = np.abs(ef) @ np.ones(e2.shape[1], np.float32)      # exact: sums below 2^24
        if int(row_l1.max()) * _amax(wc) <= F32_EXACT:
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
        dxp = np.zeros((n, h + pt + pb, w + pl + pr, o), dt)
        wt = wc.astype(dt)
        e = ec.astype(dt)
        for i, j, view in tap_views(dxp, (kh, kw), stride, (ho, wo)):
            view += e * wt[:, i, j, 0]
        dx = dxp[:, pt:pt + h, pl:pl + w, :]
        if m > 1:
            d5 = dx.reshape(n, h, w, c, m)
            dx = d5.sum(-1) if mode in INT_MODES else seq_sum(d5, 4)
        return np.ascontiguousarray(dx)
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
    if groups == 1:
        dcols = matmul(e2, wc.reshape(o, -1), gm, e_max)
    else:
        opg = o // groups
        eg = e2.reshape(-1, groups, opg).transpose(1, 0, 2)
        wg = wc.reshape(groups, opg, kh * kw * cig)
        dg = matmul(eg, wg, gm, e_max)
        dcols = dg.reshape(groups, -1, kh * kw, cig).transpose(1, 2, 0, 3).reshape(e2.shape[0], -1)
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
        dt = acc_dtype(mode)
        out = np.zeros((n, o, kh, kw, 1), dt)
        e = ec.astype(dt)
        for i, j, view in tap_views(xp, (kh, kw), stride, (ho, wo)):
            prod = (view.astype(dt) * e).reshape(n, p, o)
            out[:, :, i, j, 0] = seq_sum(prod, 1) if mode == "f32seq" else prod.sum(1)
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


# ---------------------------------------------------------------- kept structures (partial updates)


@dataclass(frozen=True)
class KeptGroup:
    """Samples with the same padded keep count, and the structures each one multiplies.

    `idx[r]` lists sample `samples[r]`'s kept structures, then pruned ones up
    to the group's width: a pruned structure's errors are
    exact zeros, so its products add exact zeros to integer sums.
    """

    samples: np.ndarray
    idx: np.ndarray
    """(m, kp): sample samples[r]'s kept structures first, then pruned ones."""


def kept_widths(kept: np.ndarray) -> np.ndarray:
    """Per sample of a (N, O) keep mask, its keep count rounded up to a power of two (at most O)."""
    k = np.maximum(kept.sum(1), 1)
    return np.minimum(np.left_shift(1, np.ceil(np.log2(k)).astype(np.int64)), kept.shape[1])


def kept_groups(kept: np.ndarray, order: np.ndarray | None = None,
                width: np.ndarray | None = None) -> list[KeptGroup]:
    """Group the samples of a (N, O) keep mask by `kept_widths`.

    A few groups per layer (at most log2(O) + 1), each one batched GEMM over
    its samples; padding to powers of two wastes less than half of each
    group's products. `order` (N, O) lists each sample's kept structures
    first (as `partial.top_k` ranks them); integer sums are exact in any order.
    """
    width = kept_widths(kept) if width is None else width
    if order is None:
        order = np.argsort(~kept, axis=1, kind="stable")   # kept first, each part in index order
    return [KeptGroup(s, np.ascontiguousarray(order[s, :kp]))
            for kp in np.unique(width) for s in [np.flatnonzero(width == kp)]]


def kept_fraction(width: np.ndarray, o: int) -> float:
    """Share of the dense products the grouped kernels compute (padding included)."""
    return float(width.sum()) / max(len(width) * o, 1)


def gather_kept(ec: np.ndarray, kept: np.ndarray, groups: list[KeptGroup]) -> list[np.ndarray]:
    """Per group, the (m, kp, P) centred errors of its samples at its structures.

    Read from the unmasked errors: the padding's pruned structures are zeroed
    here, so the errors of pruned structures never need a masked copy of the
    whole tensor. One transposed copy (N, O, P) makes every gather a row copy.
    """
    n, o = kept.shape
    et = np.ascontiguousarray(ec.reshape(n, -1, o).transpose(0, 2, 1))
    out = []
    for g in groups:
        rows = g.samples[:, None]
        eg = et[rows, g.idx]
        keep = kept[rows, g.idx]
        if not keep.all():
            np.multiply(eg, keep[:, :, None], out=eg)
        out.append(eg)
    return out


def bias_grad_acc_kept(eg: list[np.ndarray], groups: list[KeptGroup], o: int) -> np.ndarray:
    """`bias_grad_acc` (integer modes, summed over the batch) from the gathered errors: int64 (O,)."""
    out = np.zeros(o, np.int64)
    for g, e in zip(groups, eg):
        np.add.at(out, g.idx.ravel(), e.sum(2, dtype=np.int64).ravel())
    return out


def _kept_gemm_dtype(eg: np.ndarray, wc: np.ndarray, e_max: int | None) -> np.dtype:
    """Cheapest exact dtype of the (P, kp) @ (kp, C) products of `_rows_for_exact_gemm`'s rule.

    Shape bound kp * max|e| * max|w|, else the data bound max over rows of
    sum_kp |e| times max|w| (row sums exact in float32 when kp * max|e| <= 2^24).
    """
    kp = eg.shape[1]
    em = _amax(eg) if e_max is None else e_max
    wm = _amax(wc)
    if kp * em * wm <= F32_EXACT:
        return np.dtype(np.float32)
    if kp * em <= F32_EXACT:
        l1 = np.abs(eg, dtype=np.float32).sum(1)
        if int(l1.max(initial=0)) * wm <= F32_EXACT:
            return np.dtype(np.float32)
    return gemm_dtype(kp * em * wm)


def conv2d_bwd_in_acc_kept(eg: list[np.ndarray], groups: list[KeptGroup], wc: np.ndarray,
                           in_shape: tuple[int, int, int, int], stride: tuple[int, int],
                           padding: tuple[int, int, int, int], mode: str,
                           e_max: int | None = None) -> np.ndarray:
    """`conv2d_bwd_in_acc` (dense convs, integer modes) over each sample's kept filters only.

    `eg` from `gather_kept`. The same exact integers, in float64 for "int-float"
    and int64 for "int" (exact in any order): per group and tap one batched GEMM
    (m, P, kp) @ (m, kp, C) added into the padded input error.
    """
    if mode not in INT_MODES or wc.shape[3] != in_shape[3]:
        raise ValueError("conv2d_bwd_in_acc_kept: dense convs (groups 1) in an integer mode only")
    n, h, w, c = in_shape
    kh, kw = wc.shape[1:3]
    pt, pb, pl, pr = padding
    ho, wo = out_size(h, kh, stride[0], pt + pb), out_size(w, kw, stride[1], pl + pr)
    wt = wc.transpose(1, 2, 0, 3)                           # (kh, kw, O, C)
    whole = _whole(groups, n)
    wm = _amax(wc)
    overlap = -(-kh // stride[0]) * -(-kw // stride[1])     # taps that reach one input element
    dxp = None
    for g, e in zip(groups, eg):
        gd = _kept_gemm_dtype(e, wc, e_max)
        # NOTE: the tap adds, not the GEMMs, dominate here; they run in float32 when the data
        # bound (overlapping taps x largest row L1 of the errors x max|w|) proves every sum exact.
        ad = np.float64
        if gd == np.float32 and e.size:
            l1 = int(np.abs(e, dtype=np.float32).sum(1).max())      # exact: kp * max|e| <= 2^24
            ad = np.float32 if overlap * l1 * wm <= F32_EXACT else np.float64
        et = e.astype(gd).transpose(0, 2, 1)                # (m, P, kp)
        part = np.zeros((len(g.samples), h + pt + pb, w + pl + pr, c), ad)
        for i, j, view in tap_views(part, (kh, kw), stride, (ho, wo)):
            wg = wt[i, j].astype(gd, copy=False)[g.idx]     # (m, kp, C)
            view += np.matmul(et, wg).reshape(view.shape)
        if whole:
            dxp = part
        else:
            if dxp is None:
                dxp = np.zeros((n, *part.shape[1:]), np.float64)
            dxp[g.samples] = part
    dxp = dxp.astype(np.float64, copy=False)
    dx = dxp[:, pt:pt + h, pl:pl + w, :]
    return dx.astype(np.int64) if mode == "int" else dx


def _whole(groups: list[KeptGroup], n: int) -> bool:
    return len(groups) == 1 and len(groups[0].samples) == n


def conv2d_bwd_w_acc_kept(xc: np.ndarray, eg: list[np.ndarray], groups: list[KeptGroup],
                          w_shape: tuple[int, ...], stride: tuple[int, int],
                          padding: tuple[int, int, int, int], mode: str, per_sample: bool = False,
                          x_max: int | None = None, e_max: int | None = None,
                          cols: np.ndarray | None = None) -> np.ndarray:
    """`conv2d_bwd_w_acc` (dense convs, integer modes) for each sample's kept filters only.

    `eg` from `gather_kept`. Per group one batched GEMM (m, kp, P) @ (m, P, K)
    gives the kept filters' per-sample gradients; they are scattered into a zero
    (N, O, ...) buffer, or summed over the batch by a one-hot GEMM (exact: float64
    integers below 2^53).
    """
    if mode not in INT_MODES or w_shape[3] != xc.shape[3]:
        raise ValueError("conv2d_bwd_w_acc_kept: dense convs (groups 1) in an integer mode only")
    n = xc.shape[0]
    o, kh, kw, _ = w_shape
    if cols is None:
        cols = im2col(xc, (kh, kw), stride, padding, 0)
    k = cols.shape[1]
    p = cols.shape[0] // n
    c3 = cols.reshape(n, p, k)
    whole = _whole(groups, n)
    xm = _amax(cols) if x_max is None else x_max
    em = max((_amax(e) for e in eg), default=0) if e_max is None else e_max
    bound = p * xm * em                                     # of every per-sample partial sum
    dt = gemm_dtype(bound)
    parts = [np.matmul(e.astype(dt), (c3 if whole else c3[g.samples]).astype(dt, copy=False))
             for g, e in zip(groups, eg)]                   # (m, kp, K) each, exact
    if per_sample:
        out = np.zeros((n, o, k), np.int64 if mode == "int" else dt)
        for g, gg in zip(groups, parts):
            out[g.samples[:, None], g.idx] = gg
        return out.reshape(n, *w_shape)
    idx = np.concatenate([g.idx.ravel() for g in groups])
    sd = np.float64 if n * bound <= F64_EXACT else np.int64
    rows = np.concatenate([gg.reshape(-1, k) for gg in parts]).astype(sd, copy=False)
    onehot = np.zeros((o, len(idx)), sd)
    onehot[idx, np.arange(len(idx))] = 1
    total = (onehot @ rows).reshape(w_shape)                # exact: |sum| <= N * bound
    return total.astype(np.int64) if mode == "int" else total


# ---------------------------------------------------------------- pooling (any number format)


def _as_bits(a: np.ndarray) -> np.ndarray:
    """Integers as they are, floats as their bit patterns (a view): `bits * mask` is an exact select."""
    if a.dtype.kind in "iu":
        return a
    return a.view({4: np.int32, 8: np.int64, 2: np.int16}[a.dtype.itemsize])


def select(a: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """`where(keep, a, 0)` bit for bit (0 is +0.0 for floats), as one integer product."""
    bits = _as_bits(a)
    return np.multiply(bits, keep, dtype=bits.dtype).view(a.dtype)


def _tiled(kernel: tuple[int, int], stride: tuple[int, int], h: int, w: int) -> bool:
    """Windows that tile the input without overlap (stride == kernel): reshapes replace tap loops."""
    return tuple(kernel) == tuple(stride) and h >= kernel[0] and w >= kernel[1]


def maxpool_fwd(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int]
                ) -> tuple[np.ndarray, np.ndarray]:
    """Window max and the tap index (uint8) of its first maximum in (i, j) order (kept for backward)."""
    h, w = x.shape[1:3]
    ho, wo = out_size(h, kernel[0], stride[0], 0), out_size(w, kernel[1], stride[1], 0)
    taps = kernel[0] * kernel[1]
    if x.dtype.kind in "iu" and x.itemsize == 1 and taps <= 255 and _tiled(kernel, stride, h, w):
        # NOTE: byte operations only: the window max, then the index of its first
        # occurrence = the number of leading taps that differ from it.
        views = [np.ascontiguousarray(v) for _, _, v in tap_views(x, kernel, stride, (ho, wo))]
        y = views[0].copy()
        for v in views[1:]:
            np.maximum(y, v, out=y)
        ahead = (views[0] != y).view(np.uint8)      # 1 while no maximum was met yet
        arg = ahead.copy()
        for v in views[1:-1]:
            ahead &= (v != y).view(np.uint8)
            arg += ahead
        return y, arg
    if x.dtype.kind in "iu" and x.itemsize == 1 and taps <= 256:
        # NOTE: one max over packed keys (value << 8 | 255 - tap): the largest value wins, and
        # among equal values the smallest tap, i.e. the first maximum in (i, j) order.
        best = None
        for t, (_, _, view) in enumerate(tap_views(x, kernel, stride, (ho, wo))):
            key = (view.astype(np.int32) << 8) | (255 - t)
            best = key if best is None else np.maximum(best, key, out=best)
        arg = (255 - (best & 255)).astype(np.uint8)
        return (best >> 8).astype(x.dtype), arg
    y = arg = None
    for t, (_, _, view) in enumerate(tap_views(x, kernel, stride, (ho, wo))):
        if y is None:
            y, arg = view.copy(), np.zeros(view.shape, np.uint8)
            continue
        better = view > y
        y = np.where(better, view, y)
        arg += better.view(np.uint8) * (np.uint8(t) - arg)      # t where better (uint8, mod 256)
    return y, arg


def maxpool_bwd(ec: np.ndarray, arg: np.ndarray, in_shape: tuple[int, ...], kernel: tuple[int, int],
                stride: tuple[int, int]) -> np.ndarray:
    """Route each centred window error to its argmax; other inputs get 0 (overlaps add)."""
    ho, wo = ec.shape[1:3]
    if _tiled(kernel, stride, in_shape[1], in_shape[2]):
        # NOTE: windows do not overlap, so every covered input is written once:
        # (N, Ho, kh, Wo, kw, C) is the C-order layout of the covered (N, Ho*kh, Wo*kw, C)
        # input, and (arg == t) * e fills tap t: an integer product with a bool is exact, and a
        # float error is selected through its bits (0 bits = +0.0, as a select writes).
        n, kh, kw, c = in_shape[0], kernel[0], kernel[1], in_shape[3]
        bits = _as_bits(ec)
        d6 = np.empty((n, ho, kh, wo, kw, c), bits.dtype)
        for i in range(kh):
            for j in range(kw):
                np.multiply(arg == i * kw + j, bits, out=d6[:, :, i, :, j, :])
        d4 = d6.reshape(n, ho * kh, wo * kw, c).view(ec.dtype)
        if d4.shape == tuple(in_shape):
            return d4
        dx = np.zeros(in_shape, ec.dtype)
        dx[:, :ho * kh, :wo * kw] = d4
        return dx
    dx = np.zeros(in_shape, ec.dtype)
    for t, (_, _, view) in enumerate(tap_views(dx, kernel, stride, (ho, wo))):
        view += np.where(arg == t, ec, 0).astype(ec.dtype)
    return dx


def avgpool_fwd_sum(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int]) -> np.ndarray:
    """Window sums in tap order (int32 for integers, float32 for floats); the caller divides."""
    n, h, w, c = x.shape
    ho, wo = out_size(h, kernel[0], stride[0], 0), out_size(w, kernel[1], stride[1], 0)
    dt = np.float32 if x.dtype.kind == "f" else np.int32
    acc = np.zeros((n, ho, wo, c), dt)
    for _, _, view in tap_views(x, kernel, stride, (ho, wo)):
        acc += view
    return acc


def avgpool_bwd_spread(share: np.ndarray, in_shape: tuple[int, ...], kernel: tuple[int, int],
                       stride: tuple[int, int]) -> np.ndarray:
    """Add each window's (already divided) centred error share to all its inputs, in tap order."""
    dx = np.zeros(in_shape, share.dtype)
    ho, wo = share.shape[1:3]
    for _, _, view in tap_views(dx, kernel, stride, (ho, wo)):
        view += share
    return dx
