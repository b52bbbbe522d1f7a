"""The building blocks: resampling matrices, convolutions, warps, JPEG tables, with literal checks."""

import numpy as np

from mcutrain.data import imageops as ops
from mcutrain.data.jpeg import LUMA_TABLE, dct_matrix, jpeg_compression, quant_table


def test_area_and_nearest_matrices():
    a = ops.area_matrix(4, 2)
    np.testing.assert_allclose(a, [[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5]])
    np.testing.assert_allclose(ops.area_matrix(3, 2), [[2 / 3, 1 / 3, 0], [0, 1 / 3, 2 / 3]], atol=1e-6)
    np.testing.assert_array_equal(ops.nearest_matrix(2, 4), [[1, 0], [1, 0], [0, 1], [0, 1]])


def test_zoom_matrix_identity_and_shrink():
    np.testing.assert_allclose(ops.zoom_matrix(5, 1.0), np.eye(5), atol=1e-7)
    m = ops.zoom_matrix(5, 0.5)           # shrink by 2: the centre pixel keeps its source
    np.testing.assert_allclose(m[2], [0, 0, 1, 0, 0], atol=1e-7)
    np.testing.assert_allclose(m[0], [0, 0, 0, 0, 0], atol=1e-7)   # source -2 is outside: background


def test_bilinear_sample_identity_half_pixel_and_fill():
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    gy, gx = np.mgrid[0:4, 0:4].astype(np.float32)
    np.testing.assert_array_equal(ops.bilinear_sample(x, gy[None], gx[None]), x)
    half = ops.bilinear_sample(x, gy[None], gx[None] + 0.5, fill=0.0)
    np.testing.assert_allclose(half[0, 0, :3, 0], [0.5, 1.5, 2.5])
    assert half[0, 0, 3, 0] == 1.5                    # (3 + fill 0) / 2 at the border


def test_convolutions_agree_and_delta_is_identity(digits28):
    x = digits28[:3]
    delta = np.zeros((5, 5), np.float32)
    delta[2, 2] = 1
    np.testing.assert_allclose(ops.convolve2d(x, delta), x, atol=1e-7)
    np.testing.assert_allclose(ops.convolve_per_image(x, np.broadcast_to(delta, (3, 5, 5))), x, atol=1e-6)
    k = ops.disk_kernel(1.5)
    np.testing.assert_allclose(ops.convolve_per_image(x, np.broadcast_to(k, (3, *k.shape))),
                               ops.convolve2d(x, k), atol=1e-5)
    assert abs(ops.disk_kernel(2.0).sum() - 1) < 1e-6 and abs(ops.gaussian_kernel1d(1.3).sum() - 1) < 1e-6


def test_fractal_noise_range_and_shape():
    n = ops.fractal_noise(np.random.default_rng(0), 3, 28, 20, 2.0)
    assert n.shape == (3, 28, 20)
    np.testing.assert_allclose(n.min(axis=(1, 2)), 0, atol=1e-6)
    np.testing.assert_allclose(n.max(axis=(1, 2)), 1, atol=1e-6)


def test_jpeg_tables_and_dct():
    d = dct_matrix()
    np.testing.assert_allclose(d @ d.T, np.eye(8), atol=1e-6)
    np.testing.assert_array_equal(quant_table(LUMA_TABLE, 50), LUMA_TABLE)   # quality 50 = the base table
    assert quant_table(LUMA_TABLE, 10)[0, 0] == 80                          # scale 500 %: 16 -> 80
    assert quant_table(LUMA_TABLE, 100).max() == 1


def test_jpeg_keeps_flat_images_and_outputs_8bit_levels(digits28, rgb28):
    flat = np.full((2, 16, 16, 1), 128 / 255, np.float32)
    np.testing.assert_allclose(jpeg_compression(flat, 5, None), flat, atol=1e-6)
    for x in (digits28, rgb28):
        y = jpeg_compression(x, 3, None)
        np.testing.assert_allclose(y * 255, np.round(y * 255), atol=1e-3)
