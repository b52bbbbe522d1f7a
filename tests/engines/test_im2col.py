"""im2col against an independent sliding-window reference; col2im as its exact adjoint."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from mcutrain.engines.im2col import col2im, im2col

CASES = [
    # (H, W, C, kernel, stride, padding)
    (5, 5, 3, (3, 3), (1, 1), (1, 1, 1, 1)),
    (6, 7, 2, (3, 3), (2, 2), (1, 1, 1, 1)),
    (7, 6, 4, (3, 2), (2, 1), (0, 2, 1, 0)),
    (4, 4, 5, (1, 1), (1, 1), (0, 0, 0, 0)),
    (8, 8, 2, (1, 1), (2, 2), (0, 0, 0, 0)),
    (1, 9, 3, (1, 5), (1, 2), (0, 0, 2, 2)),
    (3, 3, 1, (3, 3), (1, 1), (0, 0, 0, 0)),
]


def reference_im2col(x, kernel, stride, padding, pad_value=0):
    pt, pb, pl, pr = padding
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=pad_value)
    win = sliding_window_view(xp, kernel, axis=(1, 2))  # (N, H', W', C, kh, kw)
    win = win[:, ::stride[0], ::stride[1]]
    n, ho, wo = win.shape[:3]
    return win.transpose(0, 1, 2, 4, 5, 3).reshape(n * ho * wo, -1)


@pytest.mark.parametrize("h,w,c,kernel,stride,padding", CASES)
def test_im2col_matches_reference(h, w, c, kernel, stride, padding):
    x = np.random.default_rng(0).standard_normal((2, h, w, c)).astype(np.float32)
    got = im2col(x, kernel, stride, padding)
    np.testing.assert_array_equal(got, reference_im2col(x, kernel, stride, padding))
    assert got.dtype == np.float32


def test_im2col_int8_pads_with_pad_value_and_keeps_dtype():
    x = np.arange(-8, 8, dtype=np.int8).reshape(1, 4, 4, 1)
    got = im2col(x, (3, 3), (1, 1), (1, 1, 1, 1), pad_value=-128)
    assert got.dtype == np.int8
    # First output pixel (top-left): the top row and left column are padding.
    np.testing.assert_array_equal(got[0], [-128, -128, -128, -128, -8, -7, -128, -4, -3])
    np.testing.assert_array_equal(got, reference_im2col(x, (3, 3), (1, 1), (1, 1, 1, 1), -128))


def test_columns_follow_ohwi_weight_order():
    """A conv as im2col @ W.reshape(O, -1).T equals the direct sum over taps and channels."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 3, 3, 2))
    w = rng.standard_normal((4, 3, 3, 2))  # OHWI
    y = im2col(x, (3, 3), (1, 1), (0, 0, 0, 0)) @ w.reshape(4, -1).T
    np.testing.assert_allclose(y[0], np.einsum("hwc,ohwc->o", x[0], w), rtol=1e-12)


@pytest.mark.parametrize("h,w,c,kernel,stride,padding", CASES)
def test_col2im_is_the_adjoint(h, w, c, kernel, stride, padding):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, h, w, c))
    cols = im2col(x, kernel, stride, padding)
    y = rng.standard_normal(cols.shape)
    back = col2im(y, x.shape, kernel, stride, padding)
    assert back.shape == x.shape
    np.testing.assert_allclose(np.sum(cols * y), np.sum(x * back), rtol=1e-10)


def test_col2im_sums_overlaps():
    # 3x3 input, 2x2 kernel, stride 1: the centre pixel is in all 4 windows.
    ones = np.ones((4, 4))
    back = col2im(ones, (1, 3, 3, 1), (2, 2), (1, 1), (0, 0, 0, 0))
    np.testing.assert_array_equal(back[0, :, :, 0], [[1, 2, 1], [2, 4, 2], [1, 2, 1]])


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="NHWC"):
        im2col(np.zeros((3, 3, 1)), (3, 3), (1, 1), (0, 0, 0, 0))
    with pytest.raises(ValueError, match="does not fit"):
        im2col(np.zeros((1, 2, 2, 1)), (3, 3), (1, 1), (0, 0, 0, 0))
    with pytest.raises(ValueError, match="cols shape"):
        col2im(np.zeros((5, 9)), (1, 3, 3, 1), (3, 3), (1, 1), (0, 0, 0, 0))
