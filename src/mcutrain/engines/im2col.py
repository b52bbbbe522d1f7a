"""Patch extraction for convolutions and pooling (im2col) and its adjoint (col2im).

A convolution over NHWC input with OHWI weights is one GEMM once every
receptive field is laid out as a row: `im2col(x) @ w.reshape(O, -1).T`.
Columns are ordered (kh, kw, C), exactly the order of an OHWI weight
reshaped to (O, kh*kw*C), so no weight is ever transposed. Both engines
(float and integer) share this; the integer engine pads with the input's
zero point, hence `pad_value`.

The copy reads the padded input through one strided view of all windows
(or, for a single channel, one strided view per kernel tap), so there is no
Python loop over pixels or samples. `col2im` is the exact adjoint (it sums overlapping taps), which is
what the input gradient of a convolution needs.

Example:
    >>> x = np.arange(2 * 4 * 4 * 3, dtype=np.float32).reshape(2, 4, 4, 3)
    >>> im2col(x, (3, 3), (1, 1), (1, 1, 1, 1)).shape
    (32, 27)
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided


def out_size(size: int, k: int, s: int, pad: int) -> int:
    """Output length along one axis: (size + pad - k) // s + 1 (pad = both sides summed)."""
    return (size + pad - k) // s + 1


def pad_nhwc(x: np.ndarray, padding: tuple[int, int, int, int], pad_value=0) -> np.ndarray:
    """Pad H and W of an NHWC tensor by (top, bottom, left, right); no copy when all are 0."""
    pt, pb, pl, pr = padding
    if not (pt or pb or pl or pr):
        return x
    n, h, w, c = x.shape
    xp = np.empty((n, h + pt + pb, w + pl + pr, c), x.dtype)
    if pad_value == 0:
        xp[:] = 0
    else:
        xp.fill(pad_value)
    xp[:, pt:pt + h, pl:pl + w, :] = x
    return xp


def tap_views(xp: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int],
              out_hw: tuple[int, int]):
    """Yield (i, j, view): for each kernel tap, the (N, Ho, Wo, C) strided view of padded input.

    Shared by im2col, col2im, depthwise convolution and pooling: each of them
    is a short loop over the kh*kw taps with whole-tensor numpy work per tap.
    """
    kh, kw = kernel
    sh, sw = stride
    ho, wo = out_hw
    for i in range(kh):
        for j in range(kw):
            yield i, j, xp[:, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw, :]


def im2col(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int],
           padding: tuple[int, int, int, int], pad_value=0) -> np.ndarray:
    """Patches of an NHWC tensor as rows: (N, H, W, C) -> (N*Ho*Wo, kh*kw*C), dtype kept.

    Row r = (n, ho, wo) in C order; column = (i, j, c) in C order, matching
    `weight.reshape(O, kh*kw*C)` for OHWI weights. Padded positions hold
    `pad_value` (0 for float, the zero point for asymmetric integers).
    For a 1x1 kernel with stride 1 and no padding the result is a view of
    `x` (no copy), so treat it as read-only.
    """
    if x.ndim != 4:
        raise ValueError(f"im2col needs an NHWC (4-d) tensor, got shape {x.shape}")
    n, h, w, c = x.shape
    kh, kw = kernel
    sh, sw = stride
    pt, pb, pl, pr = padding
    ho, wo = out_size(h, kh, sh, pt + pb), out_size(w, kw, sw, pl + pr)
    if ho < 1 or wo < 1:
        raise ValueError(f"kernel {kh}x{kw} does not fit input {h}x{w} with padding {padding}")
    if (kh, kw) == (1, 1) and (sh, sw) == (1, 1) and not any(padding):
        return x.reshape(n * h * w, c)  # NOTE: a pointwise conv needs no copy at all
    xp = pad_nhwc(x, padding, pad_value)
    if c == 1:
        # NOTE: with one channel the windowed copy below would move 1 element per inner
        # loop; copying one kernel tap at a time is about 1.5x faster here.
        cols = np.empty((n, ho, wo, kh, kw, c), x.dtype)
        for i, j, view in tap_views(xp, kernel, stride, (ho, wo)):
            cols[:, :, :, i, j, :] = view
        return cols.reshape(n * ho * wo, kh * kw * c)
    # All windows as one read-only strided view (N, Ho, Wo, kh, kw, C); reshape copies it
    # once, reading C-contiguous runs and writing the rows in order (2-5x faster than
    # copying tap by tap for C >= 2).
    sn, sh_, sw_, sc = xp.strides
    windows = as_strided(xp, (n, ho, wo, kh, kw, c), (sn, sh_ * sh, sw_ * sw, sh_, sw_, sc),
                         writeable=False)
    cols = windows.reshape(n * ho * wo, kh * kw * c)
    return cols if cols.flags.writeable else cols.copy()  # reshape kept a view: own it


def col2im(cols: np.ndarray, input_shape: tuple[int, int, int, int], kernel: tuple[int, int],
           stride: tuple[int, int], padding: tuple[int, int, int, int]) -> np.ndarray:
    """Adjoint of `im2col`: scatter-add rows back to an NHWC tensor of `input_shape`.

    Where receptive fields overlap, their contributions are summed; values
    that fell on padding are dropped. The result never aliases `cols` (it may
    be a view into a fresh padded buffer) and has the dtype of `cols`.
    """
    n, h, w, c = input_shape
    kh, kw = kernel
    sh, sw = stride
    pt, pb, pl, pr = padding
    ho, wo = out_size(h, kh, sh, pt + pb), out_size(w, kw, sw, pl + pr)
    if cols.shape != (n * ho * wo, kh * kw * c):
        raise ValueError(f"col2im: cols shape {cols.shape} != {(n * ho * wo, kh * kw * c)} "
                         f"for input {input_shape}, kernel {kernel}, stride {stride}, padding {padding}")
    if (kh, kw) == (1, 1) and (sh, sw) == (1, 1) and not any(padding):
        return cols.reshape(n, h, w, c).copy()
    c6 = cols.reshape(n, ho, wo, kh, kw, c)
    xp = np.zeros((n, h + pt + pb, w + pl + pr, c), cols.dtype)
    for i, j, view in tap_views(xp, kernel, stride, (ho, wo)):
        view += c6[:, :, :, i, j, :]
    return xp[:, pt:pt + h, pl:pl + w, :]
