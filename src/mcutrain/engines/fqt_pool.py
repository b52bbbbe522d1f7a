"""FQT pooling in the simulator, for any number format: max pooling with its argmax, average pooling.

Pooling moves values without arithmetic on them (max) or sums them (average), so one twin
serves the int8, uint8 and float32 precisions; maxpool records the winning tap so the backward
pass routes each error to it, as the C kernels `mt_maxpool_fwd_*_argmax` / `mt_maxpool_bwd_*` do.
"""

from __future__ import annotations

import numpy as np

from mcutrain.engines.im2col import out_size, tap_views


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
