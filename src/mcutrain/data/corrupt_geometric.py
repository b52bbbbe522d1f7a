"""Geometric corruptions: rotate, shear, scale, translate, elastic transform.

Warps are inverse affine maps about the image centre with bilinear sampling and
a zero background, as in MNIST-C (Mu & Gilmer 2019, arXiv:1906.02337), whose
ladders we take for rotation (radians), scale (shrink factor) and translation
(pixels at 28x28, scaled with the image). Direction signs are random per image.
"""

from __future__ import annotations

import numpy as np

from mcutrain.data import imageops as ops
from mcutrain.data.corrupt_blur import scale_of

ROTATE_RADIANS = (0.2, 0.4, 0.6, 0.8, 1.0)
SHEAR_FACTOR = (0.15, 0.3, 0.45, 0.6, 0.8)
SCALE_FACTOR = (0.9, 0.8, 0.7, 0.6, 0.5)
TRANSLATE_PIXELS = (1.0, 2.0, 3.0, 4.0, 5.0)
ELASTIC = ((1.0, 3.0, 0.5), (1.5, 3.0, 0.8), (2.0, 2.8, 1.1), (2.5, 2.6, 1.4), (3.0, 2.5, 1.8))
"""(displacement std in pixels, smoothing sigma in pixels, affine jitter in pixels) per severity."""


def _signs(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.choice(np.array([-1.0, 1.0]), size=shape)


def rotate(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Rotate about the centre by the severity's angle, clockwise or counter-clockwise."""
    a = ROTATE_RADIANS[severity - 1] * _signs(rng, x.shape[0])
    c, s = np.cos(a), np.sin(a)
    return ops.affine_warp(x, np.stack([np.stack([c, -s], 1), np.stack([s, c], 1)], 1))


def shear(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Horizontal shear about the centre (rows slide sideways in proportion to their height)."""
    k = SHEAR_FACTOR[severity - 1] * _signs(rng, x.shape[0])
    one, zero = np.ones_like(k), np.zeros_like(k)
    return ops.affine_warp(x, np.stack([np.stack([one, zero], 1), np.stack([k, one], 1)], 1))


def scale(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Shrink about the centre (the object gets smaller; the border fills with background)."""
    f = SCALE_FACTOR[severity - 1]
    return ops.resize(x, ops.zoom_matrix(x.shape[1], f), ops.zoom_matrix(x.shape[2], f))


def translate(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Shift by the severity's distance along both axes, each in a random direction."""
    d = TRANSLATE_PIXELS[severity - 1] * scale_of(x)
    shift = d * _signs(rng, (x.shape[0], 2))
    return ops.affine_warp(x, np.broadcast_to(np.eye(2), (x.shape[0], 2, 2)), shift)


def elastic_transform(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Smooth random displacement field plus a small random affine distortion.

    The field is white noise blurred with a Gaussian and normalized to the
    severity's standard deviation (Simard et al., ICDAR 2003, "Best practices for
    convolutional neural networks applied to visual document analysis").
    """
    std, sigma, jitter = ELASTIC[severity - 1]
    s = scale_of(x)
    n, h, w, _ = x.shape
    field = rng.uniform(-1.0, 1.0, size=(n, h, w, 2)).astype(np.float32)
    field = ops.gaussian_blur(field, sigma * s)
    field /= np.maximum(field.std(axis=(1, 2, 3), keepdims=True), 1e-6)
    field *= std * s
    a = np.eye(2) + rng.uniform(-1, 1, size=(n, 2, 2)) * (jitter * s / max(h, w))
    gy, gx = ops.pixel_grid(h, w)
    sy = a[:, 0, 0, None, None] * gy + a[:, 0, 1, None, None] * gx + (h - 1) / 2 + field[..., 0]
    sx = a[:, 1, 0, None, None] * gy + a[:, 1, 1, None, None] * gx + (w - 1) / 2 + field[..., 1]
    return ops.bilinear_sample(x, sy, sx)
