"""Per-pixel corruptions: noise, contrast, brightness, pixelation.

Each function takes a float32 NHWC batch in [0, 1], a severity 1..5 and a numpy
Generator, and returns the corrupted batch (the caller clips to [0, 1]).
All severity ladders here are the values of MNIST-C's released `corruptions.py`
(Mu & Gilmer, "MNIST-C: A Robustness Benchmark for Computer Vision", 2019,
arXiv:1906.02337); the operations themselves are those of CIFAR-10-C
(Hendrycks & Dietterich, ICLR 2019), written anew for whole batches.
"""

from __future__ import annotations

import numpy as np

from mcutrain.data.imageops import area_matrix, nearest_matrix, resize

GAUSSIAN_NOISE_STD = (0.08, 0.12, 0.18, 0.26, 0.38)
SHOT_NOISE_PHOTONS = (60.0, 25.0, 12.0, 5.0, 3.0)
IMPULSE_NOISE_AMOUNT = (0.03, 0.06, 0.09, 0.17, 0.27)
SPECKLE_NOISE_STD = (0.15, 0.20, 0.35, 0.45, 0.60)
CONTRAST_FACTOR = (0.4, 0.3, 0.2, 0.1, 0.05)
BRIGHTNESS_SHIFT = (0.1, 0.2, 0.3, 0.4, 0.5)
PIXELATE_FACTOR = (0.6, 0.5, 0.4, 0.3, 0.25)


def gaussian_noise(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Additive white Gaussian noise (sensor read noise)."""
    std = GAUSSIAN_NOISE_STD[severity - 1]
    return x + rng.standard_normal(x.shape, dtype=np.float32) * np.float32(std)


def shot_noise(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Poisson (photon-counting) noise: fewer photons per unit intensity is worse."""
    lam = np.float32(SHOT_NOISE_PHOTONS[severity - 1])
    return (rng.poisson(x * lam) / lam).astype(np.float32)


def impulse_noise(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Salt-and-pepper: a fraction of the values set to 0 or 1 with equal odds."""
    amount = IMPULSE_NOISE_AMOUNT[severity - 1]
    u = rng.random(x.shape, dtype=np.float32)
    out = np.where(u < amount / 2, np.float32(0.0), x)
    return np.where((u >= amount / 2) & (u < amount), np.float32(1.0), out)


def speckle_noise(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Multiplicative Gaussian noise: bright pixels get noisier, the background stays clean."""
    std = np.float32(SPECKLE_NOISE_STD[severity - 1])
    return x + x * rng.standard_normal(x.shape, dtype=np.float32) * std


def contrast(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Shrink every image towards its own mean, per channel."""
    c = np.float32(CONTRAST_FACTOR[severity - 1])
    mean = x.mean(axis=(1, 2), keepdims=True)
    return (x - mean) * c + mean


def brightness(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Raise the HSV value channel by a constant, keeping hue and saturation.

    NOTE: with hue and saturation fixed, RGB is proportional to V, so the result is
    rgb * V'/V with V = max over channels and V' = min(V + c, 1); a black pixel
    (V = 0) becomes grey V'. For one channel this is min(x + c, 1).
    """
    c = np.float32(BRIGHTNESS_SHIFT[severity - 1])
    v = x.max(axis=3, keepdims=True)
    v_new = np.minimum(v + c, np.float32(1.0))
    ratio = np.divide(v_new, v, out=np.zeros_like(v), where=v > 0)
    return np.where(v > 0, x * ratio, v_new)


def pixelate(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Box-downsample to a fraction of the size, then blow up with nearest neighbours."""
    f = PIXELATE_FACTOR[severity - 1]
    _, h, w, _ = x.shape
    hs, ws = max(1, int(h * f)), max(1, int(w * f))
    small = resize(x, area_matrix(h, hs), area_matrix(w, ws))
    return resize(small, nearest_matrix(hs, h), nearest_matrix(ws, w))
