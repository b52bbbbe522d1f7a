"""The corruption registry and `corrupt`, the one entry point.

Corruptions in the style of MNIST-C (Mu & Gilmer 2019, arXiv:1906.02337) and
CIFAR-10-C (Hendrycks & Dietterich, ICLR 2019): each has severities 1..5 (0 is
the clean image), works on float32 NHWC batches in [0, 1] with 1 or 3 channels,
and is deterministic for a seed. The implementations are numpy only and
vectorized over the batch.

Example:
    >>> x = np.zeros((2, 28, 28, 1), np.float32)
    >>> corrupt(x, "gaussian_noise", 3, seed=0).shape
    (2, 28, 28, 1)
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mcutrain.data import corrupt_blur as blur
from mcutrain.data import corrupt_geometric as geo
from mcutrain.data import corrupt_overlay as over
from mcutrain.data import corrupt_pixel as pix
from mcutrain.data.jpeg import jpeg_compression

SEVERITIES = (1, 2, 3, 4, 5)
CHUNK = 4096
"""Images per chunk: bounds the temporaries (a few x chunk x H x W x C floats)."""

CorruptionFn = Callable[[np.ndarray, int, np.random.Generator], np.ndarray]


class CorruptionError(ValueError):
    """A bad corruption request; the message says what is wrong and what to do."""


@dataclass(frozen=True)
class Corruption:
    """One corruption: its name, family (for grouping in tables and plots) and function."""

    name: str
    family: str
    fn: CorruptionFn

    @property
    def summary(self) -> str:
        """First line of the function's docstring: what the corruption simulates."""
        return (self.fn.__doc__ or "").strip().splitlines()[0]


_TABLE = [
    Corruption("gaussian_noise", "noise", pix.gaussian_noise),
    Corruption("shot_noise", "noise", pix.shot_noise),
    Corruption("impulse_noise", "noise", pix.impulse_noise),
    Corruption("speckle_noise", "noise", pix.speckle_noise),
    Corruption("gaussian_blur", "blur", blur.gaussian_blur),
    Corruption("defocus_blur", "blur", blur.defocus_blur),
    Corruption("motion_blur", "blur", blur.motion_blur),
    Corruption("zoom_blur", "blur", blur.zoom_blur),
    Corruption("glass_blur", "blur", blur.glass_blur),
    Corruption("contrast", "digital", pix.contrast),
    Corruption("brightness", "digital", pix.brightness),
    Corruption("pixelate", "digital", pix.pixelate),
    Corruption("jpeg_compression", "digital", jpeg_compression),
    Corruption("rotate", "geometric", geo.rotate),
    Corruption("shear", "geometric", geo.shear),
    Corruption("scale", "geometric", geo.scale),
    Corruption("translate", "geometric", geo.translate),
    Corruption("elastic_transform", "geometric", geo.elastic_transform),
    Corruption("fog", "weather", over.fog),
    Corruption("spatter", "weather", over.spatter),
    Corruption("stripe", "overlay", over.stripe),
    Corruption("zigzag", "overlay", over.zigzag),
    Corruption("dotted_line", "overlay", over.dotted_line),
]

REGISTRY: dict[str, Corruption] = {c.name: c for c in _TABLE}
CORRUPTIONS: tuple[str, ...] = tuple(REGISTRY)
"""Every corruption name, grouped by family (noise, blur, digital, geometric, weather, overlay)."""


def get_corruption(name: str) -> Corruption:
    """Look a corruption up by name; an unknown name lists the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise CorruptionError(f"unknown corruption '{name}'; known: {', '.join(CORRUPTIONS)}") from None


def check_images(x: np.ndarray) -> np.ndarray:
    """Refuse anything that is not an NHWC image batch in [0, 1] with 1 or 3 channels."""
    if not isinstance(x, np.ndarray) or x.ndim != 4:
        shape = getattr(x, "shape", None)
        raise CorruptionError(f"corruptions take an NHWC image batch (N, H, W, C), got shape {shape}; "
                              "add a batch axis with x[None] for a single image")
    if x.shape[3] not in (1, 3):
        raise CorruptionError(f"corruptions take 1- or 3-channel images, got {x.shape[3]} channels")
    if x.shape[1] < 4 or x.shape[2] < 4:
        raise CorruptionError(f"images of {x.shape[1]}x{x.shape[2]} pixels are too small to corrupt "
                              "(at least 4x4; 1-D signals such as mnist1d have no image corruptions)")
    if x.size and (not np.isfinite(x).all() or x.min() < -1e-6 or x.max() > 1 + 1e-6):
        raise CorruptionError(f"corruptions take values in [0, 1], got [{x.min()}, {x.max()}]; "
                              "scale the images first (e.g. uint8 / 255)")
    return x.astype(np.float32, copy=False)


def corrupt(x: np.ndarray, name: str, severity: int, seed: int = 0, *, stream: int = 0) -> np.ndarray:
    """Corrupt every image of `x` (float32 NHWC in [0, 1]) at `severity` 1..5 (0: a clean copy).

    Deterministic: the random draws come from a stream keyed by (seed, name,
    severity, stream) and split into fixed chunks of CHUNK images, so the same
    call always gives the same bytes. `stream` separates uses of one seed (the
    dataset loader corrupts its train set with stream 0 and its test set with 1).
    Returns a new float32 array of the same shape, clipped to [0, 1].
    """
    corruption = get_corruption(name)
    if isinstance(severity, bool) or not isinstance(severity, int | np.integer) or not 0 <= severity <= 5:
        raise CorruptionError(f"severity must be an integer 0..5 (0 = clean), got {severity!r}")
    if not isinstance(seed, int | np.integer) or seed < 0 or stream < 0:
        raise CorruptionError(f"seed and stream must be non-negative integers, got {seed!r}, {stream!r}")
    x = check_images(x)
    if severity == 0:
        return x.copy()
    root = np.random.SeedSequence([int(seed), zlib.crc32(name.encode()), int(severity), int(stream)])
    n = x.shape[0]
    out = np.empty_like(x)
    chunks = range(0, n, CHUNK)
    for start, child in zip(chunks, root.spawn(len(chunks))):
        part = x[start:start + CHUNK]
        y = corruption.fn(part, int(severity), np.random.default_rng(child))
        out[start:start + CHUNK] = np.clip(y, 0.0, 1.0)
    return out
