"""Vectorized image operations on NHWC float batches, the building blocks of the corruptions.

Everything here works on a whole batch at once: loops run over kernel taps, zoom
factors or pyramid levels (a handful), never over images or pixels. Images are
float32 NHWC; coordinates are in pixels with (0, 0) at the centre of the top-left
pixel, so the image centre is ((H - 1) / 2, (W - 1) / 2).
"""

from __future__ import annotations

import numpy as np


def gaussian_kernel1d(sigma: float) -> np.ndarray:
    """Normalized 1-D Gaussian taps out to 3 sigma (at least one tap on each side)."""
    radius = max(1, int(np.ceil(3.0 * sigma)))
    t = np.arange(-radius, radius + 1, dtype=np.float64)
    k = np.exp(-0.5 * (t / max(sigma, 1e-6)) ** 2)
    return (k / k.sum()).astype(np.float32)


def disk_kernel(radius: float, antialias: float = 0.5) -> np.ndarray:
    """A normalized disk (defocus point-spread function), softened at its rim.

    The rim weight falls linearly over `antialias` pixels so that radii between
    integers give kernels between the integer ones (no jumps between severities).
    """
    r = int(np.ceil(radius + antialias))
    yy, xx = np.mgrid[-r:r + 1, -r:r + 1]
    d = np.hypot(yy, xx)
    if antialias > 0:
        k = np.clip((radius + antialias - d) / (2 * antialias), 0.0, 1.0)
    else:
        k = (d <= radius) * 1.0
    return (k / k.sum()).astype(np.float32)


def _pad(x: np.ndarray, top: int, bottom: int, left: int, right: int, mode: str) -> np.ndarray:
    return np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), mode=mode)


def convolve2d(x: np.ndarray, kernel: np.ndarray, mode: str = "reflect") -> np.ndarray:
    """'Same' 2-D correlation of every image and channel with one small kernel.

    Borders are extended with `mode` (any np.pad mode). Summed tap by tap: a kernel
    has at most a few hundred taps, each one a whole-batch multiply-add.
    """
    kh, kw = kernel.shape
    ph, pw = kh // 2, kw // 2
    _, h, w, _ = x.shape
    xp = _pad(x, ph, kh - 1 - ph, pw, kw - 1 - pw, mode)
    out = np.zeros_like(x, dtype=np.float32)
    for i, j in zip(*np.nonzero(kernel)):
        out += kernel[i, j] * xp[:, i:i + h, j:j + w, :]
    return out


def gaussian_blur(x: np.ndarray, sigma: float, mode: str = "reflect") -> np.ndarray:
    """Separable Gaussian blur of every image (rows, then columns)."""
    k = gaussian_kernel1d(sigma)
    return convolve2d(convolve2d(x, k[:, None], mode), k[None, :], mode)


def bilinear_sample(x: np.ndarray, sy: np.ndarray, sx: np.ndarray, fill: float = 0.0) -> np.ndarray:
    """Sample every image at its own source coordinates `(sy, sx)`, each (N, H', W').

    Bilinear interpolation; neighbours outside the image contribute `fill`, which
    is how MNIST-C's warps treat the background (constant zero).
    NOTE: the image is framed with `fill` (1 pixel top/left, 2 bottom/right) and the
    coordinates clipped into the frame, so the four gathers need no bounds masks.
    """
    n, h, w, c = x.shape
    hp, wp = h + 3, w + 3
    framed = np.pad(x.astype(np.float32, copy=False), ((0, 0), (1, 2), (1, 2), (0, 0)),
                    constant_values=fill).reshape(-1, c)
    sy = np.clip(sy, -1.0, float(h)).astype(np.float32)
    sx = np.clip(sx, -1.0, float(w)).astype(np.float32)
    y0 = np.floor(sy)
    x0 = np.floor(sx)
    fy = (sy - y0)[..., None]
    fx = (sx - x0)[..., None]
    base = (np.arange(n, dtype=np.int64) * (hp * wp)).reshape((n,) + (1,) * (sy.ndim - 1))
    idx = base + (y0.astype(np.int64) + 1) * wp + (x0.astype(np.int64) + 1)
    top = framed[idx] * (1 - fx) + framed[idx + 1] * fx
    bottom = framed[idx + wp] * (1 - fx) + framed[idx + wp + 1] * fx
    return top * (1 - fy) + bottom * fy


def pixel_grid(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Output pixel coordinates relative to the image centre, each (1, H, W)."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    return (yy - (h - 1) / 2)[None], (xx - (w - 1) / 2)[None]


def affine_warp(x: np.ndarray, matrix: np.ndarray, shift: np.ndarray | None = None,
                fill: float = 0.0) -> np.ndarray:
    """Warp each image by its own inverse affine map about the image centre.

    `matrix` (N, 2, 2) maps an output pixel's (y, x) offset from the centre to the
    source offset; `shift` (N, 2) is added to the source (in pixels, (dy, dx)).
    """
    n, h, w, _ = x.shape
    gy, gx = pixel_grid(h, w)
    m = matrix.reshape(n, 2, 2, 1, 1)
    sy = m[:, 0, 0] * gy + m[:, 0, 1] * gx + (h - 1) / 2
    sx = m[:, 1, 0] * gy + m[:, 1, 1] * gx + (w - 1) / 2
    if shift is not None:
        sy = sy + shift[:, 0, None, None]
        sx = sx + shift[:, 1, None, None]
    return bilinear_sample(x, sy, sx, fill)


def area_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) weights that average input pixels by overlap (box / area resize)."""
    edges_out = np.linspace(0.0, n_in, n_out + 1)
    lo = np.maximum(edges_out[:-1, None], np.arange(n_in)[None, :])
    hi = np.minimum(edges_out[1:, None], np.arange(1, n_in + 1)[None, :])
    wts = np.clip(hi - lo, 0.0, None)
    return (wts / wts.sum(axis=1, keepdims=True)).astype(np.float32)


def nearest_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) 0/1 weights that pick the nearest input pixel (box upsampling)."""
    src = np.minimum(((np.arange(n_out) + 0.5) * n_in / n_out).astype(np.int64), n_in - 1)
    m = np.zeros((n_out, n_in), np.float32)
    m[np.arange(n_out), src] = 1.0
    return m


def linear_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) linear-interpolation weights, corners aligned (for smooth noise fields)."""
    pos = np.linspace(0.0, n_in - 1, n_out)
    i0 = np.minimum(np.floor(pos).astype(np.int64), max(n_in - 2, 0))
    f = pos - i0
    m = np.zeros((n_out, n_in), np.float32)
    m[np.arange(n_out), i0] += (1 - f) if n_in > 1 else 1.0
    if n_in > 1:
        m[np.arange(n_out), i0 + 1] += f
    return m


def zoom_matrix(n: int, factor: float) -> np.ndarray:
    """(n, n) linear-interpolation weights that magnify a line of n pixels by `factor` about its
    centre (factor < 1 shrinks it); sources outside the line weigh nothing (zero background)."""
    c = (n - 1) / 2
    src = (np.arange(n) - c) / factor + c
    i0 = np.floor(src).astype(np.int64)
    f = src - i0
    m = np.zeros((n, n + 2), np.float32)      # columns -1 .. n, the outer two dropped below
    rows = np.arange(n)
    np.add.at(m, (rows, np.clip(i0 + 1, 0, n + 1)), 1 - f)
    np.add.at(m, (rows, np.clip(i0 + 2, 0, n + 1)), f)
    return m[:, 1:n + 1]


def resize(x: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Apply separable resize matrices: rows (H', H) and cols (W', W) to NHWC images."""
    y = np.matmul(np.matmul(rows, x.transpose(0, 3, 1, 2)), cols.T)   # (N, C, H', W')
    return np.ascontiguousarray(y.transpose(0, 2, 3, 1), dtype=np.float32)


def fractal_noise(rng: np.random.Generator, n: int, h: int, w: int, decay: float) -> np.ndarray:
    """Per-image fractal value noise in [0, 1], shape (N, H, W).

    Octaves of random grids (2x2, 3x3, 5x5, ... up to the image size) are
    upsampled bilinearly and summed with amplitude 1/decay per octave, the
    spectrum of the diamond-square "plasma" that CIFAR-10-C's fog uses
    (Hendrycks & Dietterich, ICLR 2019), without its sequential fill.
    """
    total = np.zeros((n, h, w), np.float32)
    amp, cells = 1.0, 1
    while cells < 2 * max(h, w):
        g = rng.uniform(-1.0, 1.0, size=(n, cells + 1, cells + 1)).astype(np.float32)
        total += amp * np.matmul(np.matmul(linear_matrix(cells + 1, h), g), linear_matrix(cells + 1, w).T)
        amp /= decay
        cells *= 2
    lo = total.min(axis=(1, 2), keepdims=True)
    hi = total.max(axis=(1, 2), keepdims=True)
    return (total - lo) / np.maximum(hi - lo, 1e-12)


def convolve_per_image(x: np.ndarray, kernels: np.ndarray, mode: str = "reflect") -> np.ndarray:
    """'Same' convolution of each image with its own kernel, kernels (N, K, K) with K odd.

    Done in the frequency domain (one FFT per image and per kernel) because the
    kernels differ per image, so no tap loop can share them.
    """
    _, h, w, _ = x.shape
    k = kernels.shape[1]
    r = k // 2
    xp = _pad(x, r, r, r, r, mode)
    size = (h + 2 * r, w + 2 * r)
    fx = np.fft.rfft2(xp, s=size, axes=(1, 2))
    fk = np.fft.rfft2(kernels[..., None], s=size, axes=(1, 2))
    y = np.fft.irfft2(fx * fk, s=size, axes=(1, 2))
    return y[:, 2 * r:2 * r + h, 2 * r:2 * r + w, :].astype(np.float32)


def line_frame(gy: np.ndarray, gx: np.ndarray, p0: np.ndarray, p1: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coordinates of every pixel in each image's line frame from p0 towards p1 ((N, 2) as (y, x)).

    Returns (t, r, length): t the position along the line from p0, r the signed
    distance across it (both (N, H, W)), and the segment length (N, 1, 1).
    """
    d = (p1 - p0).astype(np.float32)
    length = np.maximum(np.hypot(d[:, 0], d[:, 1]), 1e-6)[:, None, None]
    uy = d[:, 0, None, None] / length
    ux = d[:, 1, None, None] / length
    ry = gy - p0[:, 0, None, None].astype(np.float32)
    rx = gx - p0[:, 1, None, None].astype(np.float32)
    return ry * uy + rx * ux, rx * uy - ry * ux, length
