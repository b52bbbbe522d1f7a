"""Blur corruptions: Gaussian, defocus (disk), motion and zoom blur, glass blur.

Sizes are in pixels of a 28x28 image and scale with the image (an 8x8 digit gets
8/28 of the blur), so a severity means the same visual damage at any size. The
ladders are ours, in the style of CIFAR-10-C and MNIST-C (Hendrycks & Dietterich,
ICLR 2019; Mu & Gilmer 2019, arXiv:1906.02337), tuned so severity 5 still leaves
Fashion-MNIST classes recognizable to a person.
"""

from __future__ import annotations

import numpy as np

from mcutrain.data import imageops as ops

GAUSSIAN_BLUR_SIGMA = (0.6, 0.9, 1.2, 1.6, 2.2)
DEFOCUS_RADIUS = (1.0, 1.5, 2.0, 2.7, 3.5)
MOTION_LENGTH = (3.0, 5.0, 7.0, 9.5, 12.0)
ZOOM_MAX = (1.10, 1.15, 1.20, 1.25, 1.30)
GLASS_BLUR = ((0.5, 1.0), (0.6, 1.5), (0.7, 2.0), (0.8, 2.5), (0.9, 3.0))
"""(sigma, max displacement) per severity."""


def scale_of(x: np.ndarray) -> float:
    """Pixels of this image per pixel of the 28x28 reference."""
    return min(x.shape[1], x.shape[2]) / 28.0


def gaussian_blur(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Out-of-focus optics approximated by a Gaussian point-spread function."""
    return ops.gaussian_blur(x, GAUSSIAN_BLUR_SIGMA[severity - 1] * scale_of(x))


def defocus_blur(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """A lens focused at the wrong distance: convolution with a disk."""
    r = DEFOCUS_RADIUS[severity - 1] * scale_of(x)
    return ops.convolve2d(x, ops.disk_kernel(r, antialias=0.5 * max(scale_of(x), 0.5)))


def motion_kernels(length: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Per-image line kernels (N, K, K): a centred antialiased segment of `length` at `angle`."""
    k = 2 * int(np.ceil(float(np.max(length)) / 2)) + 3
    gy, gx = ops.pixel_grid(k, k)
    half = (length / 2)[:, None]
    p0 = np.stack([-np.sin(angle), -np.cos(angle)], 1) * half
    t, r, seg = ops.line_frame(gy, gx, p0, -p0)
    past = np.maximum(np.maximum(-t, t - seg), 0.0)
    wts = np.clip(1.0 - np.hypot(r, past), 0.0, None)
    return wts / wts.sum(axis=(1, 2), keepdims=True)


def motion_blur(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Camera shake along a straight line, a random angle in [-45, 45] degrees per image.

    The line is centred on each pixel, so the object is smeared but does not move.
    """
    n = x.shape[0]
    length = np.full(n, MOTION_LENGTH[severity - 1] * scale_of(x))
    angle = np.deg2rad(rng.uniform(-45.0, 45.0, size=n))
    return ops.convolve_per_image(x, motion_kernels(length, angle))


def zoom_blur(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Zooming during the exposure: the mean of the image magnified by 1 .. zmax about its centre."""
    _, h, w, _ = x.shape
    out = x.copy()
    zooms = np.linspace(1.0, ZOOM_MAX[severity - 1], 8)[1:]
    for z in zooms:
        out += ops.resize(x, ops.zoom_matrix(h, z), ops.zoom_matrix(w, z))
    return out / (len(zooms) + 1)


def glass_blur(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Frosted glass: blur, jitter every pixel by a random local displacement, blur again."""
    sigma, delta = GLASS_BLUR[severity - 1]
    s = scale_of(x)
    n, h, w, _ = x.shape
    y = ops.gaussian_blur(x, sigma * s)
    gy, gx = ops.pixel_grid(h, w)
    jitter = rng.uniform(-delta * s, delta * s, size=(2, n, h, w))
    y = ops.bilinear_sample(y, np.clip(gy + (h - 1) / 2 + jitter[0], 0, h - 1),
                            np.clip(gx + (w - 1) / 2 + jitter[1], 0, w - 1))
    return ops.gaussian_blur(y, sigma * s)
