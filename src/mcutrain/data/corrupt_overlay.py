"""Corruptions that lay something over the image: fog, spatter, stripe, zigzag, dotted line.

Fog and spatter are made in the manner of CIFAR-10-C (Hendrycks & Dietterich,
ICLR 2019) with our own severity values; stripe, zigzag and dotted line are
MNIST-C's (Mu & Gilmer 2019, arXiv:1906.02337), where each had one fixed strength:
our severities grow the band width or the number of lines, and MNIST-C's setting
sits at severity 5 (stripe: 7-pixel bands) or 1 (one line).
Lengths are in pixels of a 28x28 image and scale with the image.
"""

from __future__ import annotations

import numpy as np

from mcutrain.data import imageops as ops
from mcutrain.data.corrupt_blur import scale_of

FOG = ((0.2, 3.0), (0.5, 3.0), (0.75, 2.5), (1.0, 2.0), (1.5, 1.75))
"""(fog strength, octave decay) per severity: stronger and coarser fog is worse."""
SPATTER = ((0.05, 2.0), (0.10, 2.0), (0.15, 1.8), (0.22, 1.6), (0.30, 1.5))
"""(fraction of the image covered by mud, blob smoothing sigma in pixels) per severity."""
_GAUSS_UPPER_QUANTILE = {0.05: 1.6449, 0.10: 1.2816, 0.15: 1.0364, 0.22: 0.7722, 0.30: 0.5244}
MUD = 63.0 / 255.0
STRIPE_WIDTH = (1.0, 2.0, 3.0, 5.0, 7.0)
LINES = (1, 2, 3, 4, 5)


def fog(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Add fractal haze and rescale so the brightest original value keeps its place."""
    strength, decay = FOG[severity - 1]
    n, h, w, _ = x.shape
    haze = ops.fractal_noise(rng, n, h, w, decay)[..., None]
    top = x.max(axis=(1, 2, 3), keepdims=True)
    return (x + strength * haze) * top / (top + strength)


def spatter(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Blobs of mud: smoothed noise above a threshold chosen for the severity's coverage."""
    coverage, sigma = SPATTER[severity - 1]
    n, h, w, _ = x.shape
    field = ops.gaussian_blur(rng.standard_normal((n, h, w, 1), dtype=np.float32), sigma * scale_of(x))
    field -= field.mean(axis=(1, 2, 3), keepdims=True)
    field /= np.maximum(field.std(axis=(1, 2, 3), keepdims=True), 1e-6)
    mask = np.clip((field - _GAUSS_UPPER_QUANTILE[coverage]) / 0.3 + 0.5, 0.0, 1.0)
    return x * (1 - mask) + np.float32(MUD) * mask


def stripe(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Invert bands along two opposite borders (vertical or horizontal, random per image)."""
    n, h, w, _ = x.shape
    band = STRIPE_WIDTH[severity - 1] * scale_of(x)
    yy, xx = np.mgrid[0:h, 0:w]
    in_cols = (np.minimum(xx, w - 1 - xx) < band)[None]
    in_rows = (np.minimum(yy, h - 1 - yy) < band)[None]
    vertical = (rng.random(n) < 0.5)[:, None, None]
    inv = np.where(vertical, in_cols, in_rows)[..., None]
    return np.where(inv, 1.0 - x, x)


def _stroke(distance: np.ndarray, s: float) -> np.ndarray:
    """Antialiased line intensity: 1 within 0.3 pixel of the line, 0 beyond 1.1 pixels."""
    u = max(s, 0.4)
    return np.clip((1.1 * u - distance) / (0.8 * u), 0.0, 1.0).astype(np.float32)


def _crossing_endpoints(rng: np.random.Generator, n: int, h: int, w: int, inset: float
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Random segments across each image, from one border to the opposite one ((N, 2) as (y, x))."""
    a = rng.uniform(0, h - 1, size=(2, n))
    b = rng.uniform(0, w - 1, size=(2, n))
    horizontal = rng.random(n) < 0.5
    p0 = np.where(horizontal[:, None], np.stack([a[0], np.full(n, inset)], 1),
                  np.stack([np.full(n, inset), b[0]], 1))
    p1 = np.where(horizontal[:, None], np.stack([a[1], np.full(n, w - 1 - inset)], 1),
                  np.stack([np.full(n, h - 1 - inset), b[1]], 1))
    return p0, p1


def dotted_line(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Draw dashed white lines right across the image (dashes and gaps 2 pixels long)."""
    n, h, w, _ = x.shape
    s = scale_of(x)
    gy, gx = np.mgrid[0:h, 0:w].astype(np.float32)
    ink = np.zeros((n, h, w), np.float32)
    for _ in range(LINES[severity - 1]):
        p0, p1 = _crossing_endpoints(rng, n, h, w, 0.0)
        t, r, length = ops.line_frame(gy[None], gx[None], p0, p1)
        on = ((np.floor(t / (2.0 * max(s, 0.5))) % 2) == 0) & (t >= 0) & (t <= length)
        ink = np.maximum(ink, _stroke(np.abs(r), s) * on)
    return np.maximum(x, ink[..., None])


def zigzag(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Draw white zigzag lines across the image: teeth 4 pixels apart, 4 pixels high.

    The zigzag is a triangle wave of slope 1 in the frame of a random line, so the
    distance of a pixel to it is |r - wave(t)| / sqrt(2) (exact away from the corners).
    """
    n, h, w, _ = x.shape
    s = scale_of(x)
    half_period, amp = 4.0 * s, 2.0 * s
    gy, gx = np.mgrid[0:h, 0:w].astype(np.float32)
    ink = np.zeros((n, h, w), np.float32)
    for _ in range(LINES[severity - 1]):
        p0, p1 = _crossing_endpoints(rng, n, h, w, 2.0 * s)
        t, r, length = ops.line_frame(gy[None], gx[None], p0, p1)
        phase = np.mod(t / (2 * half_period), 1.0)
        wave = amp * (4.0 * np.abs(phase - 0.5) - 1.0)
        inside = (t >= 0) & (t <= length)
        ink = np.maximum(ink, _stroke(np.abs(r - wave) / np.sqrt(2.0), s) * inside)
    return np.maximum(x, ink[..., None])
