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

Names mirror future C kernels (`mt_conv2d_bwd_in_s8_f32`: int8 operands,
float32 errors). Each returns a fresh array (it overwrites, never accumulates).
"""

from __future__ import annotations

import numpy as np

from mcutrain.engines.im2col import col2im, im2col, out_size, pad_nhwc, tap_views


def requant_bwd_f32(e_y: np.ndarray, y: np.ndarray, slope: np.ndarray, act_min: int,
                    act_max: int) -> np.ndarray:
    """``e_acc = e_y * slope[c] * [act_min < y < act_max]``, channels last; slope = M_c float32."""
    mask = (y > act_min) & (y < act_max)
    return np.where(mask, e_y * np.asarray(slope, np.float32), np.float32(0)).astype(np.float32)


def _is_depthwise(w: np.ndarray, c: int, groups: int) -> bool:
    return groups == c and w.shape[-1] == 1 and c > 1


def conv2d_bwd_in_s8_f32(e_acc: np.ndarray, w: np.ndarray, x_shape: tuple[int, ...],
                         stride: tuple[int, int], padding: tuple[int, int, int, int],
                         groups: int = 1) -> np.ndarray:
    """Error of the conv input (N, H, W, C) from the accumulator error (N, Ho, Wo, O), int8 OHWI w."""
    n, h, wd, c = x_shape
    o, kh, kw, cig = w.shape
    wf = w.astype(np.float32)
    ho, wo = e_acc.shape[1:3]
    if _is_depthwise(w, c, groups):
        pt, pb, pl, pr = padding
        xp = np.zeros((n, h + pt + pb, wd + pl + pr, o), np.float32)
        for i, j, view in tap_views(xp, (kh, kw), stride, (ho, wo)):
            view += e_acc * wf[:, i, j, 0]
        ex = xp[:, pt:pt + h, pl:pl + wd, :]
        return ex.reshape(n, h, wd, c, o // c).sum(axis=4) if o != c else ex.copy()
    m = n * ho * wo
    opg = o // groups
    e_g = e_acc.reshape(m, groups, opg).transpose(1, 0, 2)                  # (G, M, Og)
    w_g = wf.reshape(groups, opg, kh * kw * cig)                             # (G, Og, K)
    cols = np.matmul(e_g, w_g)                                               # (G, M, K)
    cols = cols.reshape(groups, m, kh * kw, cig).transpose(1, 2, 0, 3).reshape(m, kh * kw * c)
    return col2im(cols, (n, h, wd, c), (kh, kw), stride, padding)


def conv2d_bwd_w_s8_f32(x: np.ndarray, x_zp: int, e_acc: np.ndarray, w_shape: tuple[int, ...],
                        stride: tuple[int, int], padding: tuple[int, int, int, int],
                        groups: int = 1) -> np.ndarray:
    """Weight gradient (O, kh, kw, C/groups) = sum over positions of (x - z_x) * e_acc."""
    c = x.shape[3]
    o, kh, kw, cig = w_shape
    xc = x.astype(np.float32) - np.float32(x_zp)
    ho, wo = e_acc.shape[1:3]
    if groups == c and cig == 1 and c > 1:
        xp = pad_nhwc(xc, padding, 0)
        if o != c:
            xp = np.repeat(xp, o // c, axis=3)
        gw = np.zeros(w_shape, np.float32)
        for i, j, view in tap_views(xp, (kh, kw), stride, (ho, wo)):
            gw[:, i, j, 0] = np.einsum("nhwc,nhwc->c", view, e_acc)
        return gw
    cols = im2col(xc, (kh, kw), stride, padding, 0)
    m = cols.shape[0]
    opg = o // groups
    cols_g = cols.reshape(m, kh * kw, groups, cig).transpose(2, 0, 1, 3).reshape(groups, m, -1)
    e_g = e_acc.reshape(m, groups, opg).transpose(1, 2, 0)                   # (G, Og, M)
    return np.matmul(e_g, cols_g).reshape(w_shape)


def linear_bwd_in_s8_f32(e_acc: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Input error (N, I) = e_acc (N, O) @ W (O, I)."""
    return e_acc @ w.astype(np.float32)


def linear_bwd_w_s8_f32(x: np.ndarray, x_zp: int, e_acc: np.ndarray) -> np.ndarray:
    """Weight gradient (O, I) = e_acc^T @ (x - z_x)."""
    return e_acc.T @ (x.reshape(len(x), -1).astype(np.float32) - np.float32(x_zp))


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
