"""Backward kernels of the int8 graph with the straight-through estimator (STE), float32 errors.

Used by `bp-qas` (Lin et al., NeurIPS 2022: int8 forward graph, back-propagation
through it with the STE; their MCU graph runs the backward pass in float32).
Errors are gradients with respect to the *integer* tensors: for an int8
tensor ``q`` with ``real = s (q - z)``, ``e_q = dL/dq = s * dL/dreal``. In
these units every op's backward reads only integers and its own constants:

- requantization ``y = clamp(round(acc * M_c) + z_y)``: STE through the
  rounding, zero where ``y`` sits on the clamp bound (saturated, or cut by a
  fused relu/relu6): ``e_acc = e_y * M_c * [act_min < y < act_max]``;
- conv2d / linear: ``e_x = sum_c W[c] e_acc[c]`` (transposed conv),
  ``g_W = sum (x - z_x) e_acc``, ``g_b = sum e_acc`` (the int32 bias shares
  the accumulator's units);
- maxpool: the error goes to the first maximum of each window in tap order
  (row-major), the C loop's tie rule; avgpool / global-avgpool: ``e / count``
  to every tap (STE through the integer rounding);
- add: ``e_a = e_y * (s_a / s_y)``, ``e_b = e_y * (s_b / s_y)`` where not saturated;
- flatten: a reshape.

The float32 sums follow one sequential order, the order of the C twins
(``codegen/runtime/train/qas/mt_*_bwd_*_f32.c``; ``docs/integer-semantics.md`` 12.6):
every sum starts from +0.0 and adds its terms one at a time in index order,
each product rounded to float32 before the add (no FMA):

- ``conv2d_bwd_in``: per input element, the taps (ky, kx) in row-major order,
  each tap's term being its own sum over the group's output channels in order;
- ``conv2d_bwd_w``: per weight and per sample, the output positions (oy, ox)
  in row-major order; then those per-sample sums over the samples in order;
- ``linear_bwd_in``: over the outputs in order; ``linear_bwd_w``: over the
  samples in order; ``bias_bwd_f32``: over the rows (sample, oy, ox) in order.

numpy has no ordered dot product (BLAS blocks its sums and may fuse the
multiply-add), so each kernel loops over the reduction index and does one
vectorized multiply and one add over everything else: the C order without a
Python loop over elements. Padded taps of the weight gradient add +-0, which
changes no sum of finite terms (C skips them); for the same reason the conv
kernels may skip zero errors (most are zero after relu masks and maxpool
routing), which changes no bit of the result: dense convs then sum each row's
nonzero terms only (`ordered_sparse`).

Names mirror the C kernels (`mt_conv2d_bwd_in_s8_f32`: int8 operands,
float32 errors). Each returns a fresh array (it overwrites, never accumulates).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from mcutrain.engines.im2col import col2im, im2col, out_size, pad_nhwc, tap_views
from mcutrain.engines.ordered_sparse import ordered_sparse_rows

BLOCK = 1 << 16
"""Floats in one working block of the ordered sums (256 KB, so that a block and its
partial sums stay in cache; on small-cnn, 2^14..2^18 timed within noise of each other)."""
BIG_BLOCK = 1 << 22
"""Floats of per-sample partial sums when the samples are the innermost axis (16 MB at most)."""
SPARSE_DENSITY = 0.5
"""Below this fraction of nonzero errors, the conv kernels add only the nonzero terms."""
SPARSE_MIN_FAN_IN = 32
"""...and only when each term is a row of at least this many products (shorter rows lose to
the dense loop: measured on small-cnn, 16% nonzero after relu and maxpool, conv2 (fan-in 144)
2x faster for the input error and 1.5x for the weight gradient, conv1 (fan-in 9) 2.5x slower)."""


def _sparse(e_acc: np.ndarray, fan_in: int) -> bool:
    """Whether to skip zero errors: exact, since adding a +-0 term leaves every running sum
    (which starts at +0.0, so is never -0.0) unchanged."""
    return fan_in >= SPARSE_MIN_FAN_IN and np.count_nonzero(e_acc) < SPARSE_DENSITY * e_acc.size


def requant_bwd_f32(e_y: np.ndarray, y: np.ndarray, slope: np.ndarray, act_min: int,
                    act_max: int) -> np.ndarray:
    """``e_acc = e_y * slope[c] * [act_min < y < act_max]``, channels last; slope = M_c float32."""
    mask = (y > act_min) & (y < act_max)
    return np.where(mask, e_y * np.asarray(slope, np.float32), np.float32(0)).astype(np.float32, copy=False)


def add_rows_f32(acc: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``acc = (((acc + rows[0]) + rows[1]) + ...)`` in float32, in place; returns `acc`.

    The running sum of a C loop over the leading axis of `rows` (shape
    (R, *acc.shape)). NOTE: `np.add.accumulate` is sequential by definition
    (each partial sum is an output), unlike `np.add.reduce`/`sum`, which may
    sum pairwise; it runs over blocks of rows, each block seeded with the
    running sum, to bound the temporary.
    """
    r = rows.shape[0]
    if r == 0:
        return acc
    step = max(1, BLOCK // max(1, acc.size))
    flat = acc.reshape(-1)
    for r0 in range(0, r, step):
        blk = rows[r0:r0 + step].reshape(-1, flat.size).astype(np.float32)   # a fresh copy
        blk[0] = flat + blk[0]
        np.add.accumulate(blk, axis=0, out=blk)
        flat[...] = blk[-1]
    return acc


def bias_bwd_f32(e_acc: np.ndarray) -> np.ndarray:
    """Bias gradient: column sums of the (rows, O) accumulator error from +0.0 in row order."""
    o = e_acc.shape[-1]
    rows = np.asarray(e_acc, np.float32).reshape(-1, o)
    if o < 2 or rows.shape[0] == 0:
        return add_rows_f32(np.zeros(o, np.float32), rows)
    # NOTE: a reduction over the outer axis of a C-contiguous (rows, O >= 2) array adds the rows
    # in turn (numpy sums pairwise only along the contiguous axis; `fqt_update._column_sums`), one
    # pass instead of add_rows_f32's copy and accumulate; "+ 0" turns -0.0 into C's +0.0
    return (np.add.reduce(np.ascontiguousarray(rows), axis=0) + np.float32(0)).astype(np.float32)


def _is_depthwise(w_shape: tuple[int, ...], c: int, groups: int) -> bool:
    return groups == c and w_shape[-1] == 1 and c > 1


def conv2d_bwd_in_s8_f32(e_acc: np.ndarray, w: np.ndarray, x_shape: tuple[int, ...],
                         stride: tuple[int, int], padding: tuple[int, int, int, int],
                         groups: int = 1) -> np.ndarray:
    """Error of the conv input (N, H, W, C) from the accumulator error (N, Ho, Wo, O), int8 OHWI w.

    Per tap, the sum over the group's output channels in order; then the taps in
    row-major order from +0.0 (`col2im`'s order).
    """
    n, h, wd, c = x_shape
    o, kh, kw, cig = w.shape
    wf = w.astype(np.float32)
    e_acc = np.asarray(e_acc, np.float32)
    ho, wo = e_acc.shape[1:3]
    if _is_depthwise(w.shape, c, groups):
        return _dw_bwd_in(e_acc, wf, x_shape, stride, padding)
    m = n * ho * wo
    opg = o // groups
    kg = kh * kw * cig
    sparse = _sparse(e_acc, kg)
    if sparse and groups == 1:          # each row's nonzero errors only, in channel order
        cols = ordered_sparse_rows(e_acc.reshape(m, o), wf.reshape(o, kg))
        return col2im(cols, (n, h, wd, c), (kh, kw), stride, padding)
    e_g = e_acc.reshape(m, groups, opg)                                      # (M, G, Og)
    w_g = wf.reshape(groups, opg, kg)                                        # (G, Og, Kg)
    cols = np.empty((m, groups, kg), np.float32)
    rows = max(1, BLOCK // (groups * kg))
    tmp = np.empty((rows, groups, kg), np.float32)
    for r0 in range(0, m, rows):
        r1 = min(m, r0 + rows)
        out, t = cols[r0:r1], tmp[:r1 - r0]
        out[...] = 0
        for j in range(opg):                                                 # the channel sum, in order
            if sparse:                              # the (row, group) pairs whose error is nonzero
                ej = e_g[r0:r1, :, j]
                ri, gi = np.nonzero(ej)
                out[ri, gi] += ej[ri, gi, None] * w_g[gi, j]
                continue
            np.multiply(e_g[r0:r1, :, j, None], w_g[None, :, j, :], out=t)
            out += t
    if groups > 1:
        cols = cols.reshape(m, groups, kh * kw, cig).transpose(0, 2, 1, 3)
    return col2im(cols.reshape(m, kh * kw * c), (n, h, wd, c), (kh, kw), stride, padding)


def _dw_bwd_in(e_acc: np.ndarray, wf: np.ndarray, x_shape: tuple[int, ...], stride: tuple[int, int],
               padding: tuple[int, int, int, int]) -> np.ndarray:
    """Depthwise (groups = C, multiplier m = O / C): per tap, the m products summed, then taps."""
    n, h, wd, c = x_shape
    o, kh, kw, _ = wf.shape
    mult = o // c
    pt, pb, pl, pr = padding
    ho, wo = e_acc.shape[1:3]
    xp = np.zeros((n, h + pt + pb, wd + pl + pr, c), np.float32)
    e5 = e_acc.reshape(n, ho, wo, c, mult)
    w3 = wf.reshape(c, mult, kh, kw)
    t = np.empty((n, ho, wo, c), np.float32)
    tmp = np.empty_like(t)
    for i, j, view in tap_views(xp, (kh, kw), stride, (ho, wo)):
        np.multiply(e5[..., 0], w3[:, 0, i, j], out=t)
        # NOTE: t starts at p0 rather than 0 + p0; they differ only in the sign of a zero t,
        # which cannot reach e_x because the tap sum starts from +0.0
        for k in range(1, mult):
            np.multiply(e5[..., k], w3[:, k, i, j], out=tmp)
            t += tmp
        view += t
    return xp[:, pt:pt + h, pl:pl + wd, :]


def conv2d_bwd_w_s8_f32(x: np.ndarray, x_zp: int, e_acc: np.ndarray, w_shape: tuple[int, ...],
                        stride: tuple[int, int], padding: tuple[int, int, int, int],
                        groups: int = 1) -> np.ndarray:
    """Weight gradient (O, kh, kw, C/groups) = sum of (x - z_x) * e_acc over positions and samples.

    Per sample, the output positions in row-major order from +0.0; then the
    per-sample sums over the samples in order from +0.0. Samples go in blocks:
    the loop over positions is vectorized over a block's samples and weights.
    """
    n, _, _, c = x.shape
    o, kh, kw, cig = w_shape
    e_acc = np.asarray(e_acc, np.float32)
    ho, wo = e_acc.shape[1:3]
    xc = x.astype(np.float32) - np.float32(x_zp)
    if _is_depthwise(w_shape, c, groups):
        return _dw_bwd_w(xc, e_acc, w_shape, stride, padding)
    p = ho * wo
    opg = o // groups
    kg = kh * kw * cig
    e4 = e_acc.reshape(n, p, groups, opg)
    gw = np.zeros((groups, opg, kg), np.float32)
    # NOTE: the innermost (contiguous) axis of the vectorized product is the longer of the
    # weight's fan-in and the batch: numpy's inner loops are slow when short (measured: a 3x3
    # single-channel conv runs about 2x faster with the samples innermost).
    sparse = _sparse(e_acc, kg)
    if sparse and groups == 1:
        return _sparse_bwd_w(xc, e_acc, w_shape, stride, padding)
    samples_inner = n > kg and not sparse
    nb = max(1, min(n, (BIG_BLOCK if samples_inner else BLOCK) // (o * kg)))
    for n0 in range(0, n, nb):
        n1 = min(n, n0 + nb)
        cols = im2col(xc[n0:n1], (kh, kw), stride, padding, 0).reshape(n1 - n0, p, kh * kw, groups, cig)
        cols = cols.transpose(1, 0, 3, 2, 4).reshape(p, n1 - n0, groups, kg)     # (P, nb, G, Kg)
        eb = e4[n0:n1].transpose(1, 0, 2, 3)                                      # (P, nb, G, Og)
        if samples_inner:
            a = np.ascontiguousarray(eb.transpose(0, 2, 3, 1))[:, :, :, None, :]   # (P, G, Og, 1, nb)
            b = np.ascontiguousarray(cols.transpose(0, 2, 3, 1))[:, :, None, :, :]  # (P, G, 1, Kg, nb)
            part = np.zeros((groups, opg, kg, n1 - n0), np.float32)
        else:
            a, b = eb[..., None], cols[:, :, :, None, :]                          # (P, nb, G, Og|1, 1|Kg)
            part = np.zeros((n1 - n0, groups, opg, kg), np.float32)
        tmp = np.empty_like(part)
        for q in range(p):                                     # the per-sample sums, in position order
            if sparse:                              # the (sample, group, output) triples with e != 0
                eq = eb[q]
                ni, gi, oi = np.nonzero(eq)
                part[ni, gi, oi] += eq[ni, gi, oi, None] * cols[q, ni, gi]
                continue
            np.multiply(a[q], b[q], out=tmp)
            part += tmp
        add_rows_f32(gw, np.moveaxis(part, -1, 0) if samples_inner else part)
    return gw.reshape(w_shape)


def _sparse_bwd_w(xc: np.ndarray, e_acc: np.ndarray, w_shape: tuple[int, ...], stride: tuple[int, int],
                  padding: tuple[int, int, int, int]) -> np.ndarray:
    """Dense conv weight gradient from the nonzero errors only: per (sample, filter), the positions
    with a nonzero error in row-major order; then the samples in order (`add_rows_f32`)."""
    n = xc.shape[0]
    o, kh, kw, cig = w_shape
    ho, wo = e_acc.shape[1:3]
    p, kg = ho * wo, kh * kw * cig
    gw = np.zeros((o, kg), np.float32)
    nb = max(1, min(n, BIG_BLOCK // (p * kg)))
    for n0 in range(0, n, nb):
        n1 = min(n, n0 + nb)
        cols = im2col(xc[n0:n1], (kh, kw), stride, padding, 0)                # ((n1-n0)*P, Kg)
        e_rows = e_acc[n0:n1].reshape(n1 - n0, p, o).transpose(0, 2, 1).reshape(-1, p)   # (b*O, P)
        base = np.repeat(np.arange(n1 - n0) * p, o)                           # sample b's rows in cols
        part = ordered_sparse_rows(e_rows, cols, base).reshape(n1 - n0, o, kg)
        add_rows_f32(gw, part)
    return gw.reshape(w_shape)


def _dw_bwd_w(xc: np.ndarray, e_acc: np.ndarray, w_shape: tuple[int, ...], stride: tuple[int, int],
              padding: tuple[int, int, int, int]) -> np.ndarray:
    """Depthwise weight gradient: all taps at once from a strided view of the windows."""
    n, _, _, c = xc.shape
    o, kh, kw, _ = w_shape
    ho, wo = e_acc.shape[1:3]
    xp = pad_nhwc(xc, padding, 0)
    if o != c:
        xp = np.repeat(xp, o // c, axis=3)
    sn, sh_, sw_, sc = xp.strides
    win = as_strided(xp, (n, ho, wo, kh, kw, o), (sn, sh_ * stride[0], sw_ * stride[1], sh_, sw_, sc),
                     writeable=False)
    gw = np.zeros((kh, kw, o), np.float32)
    nb = max(1, min(n, BLOCK // (o * kh * kw)))
    for n0 in range(0, n, nb):
        n1 = min(n, n0 + nb)
        part = np.zeros((n1 - n0, kh, kw, o), np.float32)
        tmp = np.empty_like(part)
        for oy in range(ho):
            for ox in range(wo):
                np.multiply(win[n0:n1, oy, ox], e_acc[n0:n1, oy, ox, None, None, :], out=tmp)
                part += tmp
        add_rows_f32(gw, part)
    return gw.transpose(2, 0, 1)[..., None].copy()


def linear_bwd_in_s8_f32(e_acc: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Input error (N, I) = sum over o in order of e_acc[:, o] * W[o, :], from +0.0."""
    e_acc = np.asarray(e_acc, np.float32)
    wf = w.astype(np.float32)
    out = np.zeros((e_acc.shape[0], wf.shape[1]), np.float32)
    tmp = np.empty_like(out)
    for j in range(wf.shape[0]):
        np.multiply(e_acc[:, j, None], wf[j], out=tmp)
        out += tmp
    return out


def linear_bwd_w_s8_f32(x: np.ndarray, x_zp: int, e_acc: np.ndarray) -> np.ndarray:
    """Weight gradient (O, I) = sum over samples in order of e_acc[n, :, None] * (x - z_x)[n], from +0.0."""
    e_acc = np.asarray(e_acc, np.float32)
    xc = x.reshape(len(x), -1).astype(np.float32) - np.float32(x_zp)
    out = np.zeros((e_acc.shape[1], xc.shape[1]), np.float32)
    tmp = np.empty_like(out)
    for s in range(len(xc)):
        np.multiply(e_acc[s, :, None], xc[s], out=tmp)
        out += tmp
    return out


def maxpool_bwd_s8_f32(x: np.ndarray, y: np.ndarray, e_y: np.ndarray, kernel: tuple[int, int],
                       stride: tuple[int, int]) -> np.ndarray:
    """Route each window's error to its first maximum (tap order), summing where windows overlap."""
    ex = np.zeros(x.shape, np.float32)
    taken = np.zeros(y.shape, bool)
    for _, _, (xv, ev) in _paired_taps(x, ex, kernel, stride, y.shape[1:3]):
        hit = (xv == y) & ~taken
        ev += np.where(hit, e_y, np.float32(0))
        taken |= hit
    return ex


def _paired_taps(x: np.ndarray, ex: np.ndarray, kernel, stride, out_hw):
    for (i, j, xv), (_, _, ev) in zip(tap_views(x, kernel, stride, out_hw),
                                      tap_views(ex, kernel, stride, out_hw)):
        yield i, j, (xv, ev)


def avgpool_bwd_f32(e_y: np.ndarray, x_shape: tuple[int, ...], kernel: tuple[int, int],
                    stride: tuple[int, int]) -> np.ndarray:
    """``e / (kh * kw)`` to every tap of each window (STE through the rounded division)."""
    ex = np.zeros(x_shape, np.float32)
    share = e_y / np.float32(kernel[0] * kernel[1])
    for _, _, view in tap_views(ex, kernel, stride, e_y.shape[1:3]):
        view += share
    return ex


def global_avgpool_bwd_f32(e_y: np.ndarray, x_shape: tuple[int, ...]) -> np.ndarray:
    """``e / (H * W)`` broadcast over H and W."""
    n, h, w, c = x_shape
    return np.broadcast_to(e_y.reshape(n, 1, 1, c) / np.float32(h * w), x_shape).astype(np.float32)


def add_bwd_f32(e_y: np.ndarray, y: np.ndarray, ratio_a: float, ratio_b: float, act_min: int,
                act_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Errors of both add inputs: ``e_y * s_in / s_y`` where the output is not saturated."""
    e = np.where((y > act_min) & (y < act_max), e_y, np.float32(0)).astype(np.float32)
    return e * np.float32(ratio_a), e * np.float32(ratio_b)


def conv_out_hw(h: int, w: int, kernel, stride, padding) -> tuple[int, int]:
    return (out_size(h, kernel[0], stride[0], padding[0] + padding[1]),
            out_size(w, kernel[1], stride[1], padding[2] + padding[3]))
