"""JPEG-like compression in numpy: 8x8 block DCT, quantization with the standard
tables scaled by a quality factor, inverse DCT.

It reproduces the artefacts that matter for robustness (blocking, ringing, lost
fine texture) without an image codec: no entropy coding (lossless anyway) and no
chroma subsampling. Tables are those of ITU-T T.81 (JPEG) Annex K, Tables K.1/K.2;
the quality-to-scale rule is the Independent JPEG Group's (libjpeg `jpeg_quality_scaling`).
Colour images go through the JFIF YCbCr transform (ITU-T T.871).
"""

from __future__ import annotations

import numpy as np

JPEG_QUALITY = (25, 18, 15, 10, 7)
"""Quality per severity, the MNIST-C ladder (Mu & Gilmer 2019, arXiv:1906.02337)."""

LUMA_TABLE = np.array([
    [16, 11, 10, 16, 24, 40, 51, 61],
    [12, 12, 14, 19, 26, 58, 60, 55],
    [14, 13, 16, 24, 40, 57, 69, 56],
    [14, 17, 22, 29, 51, 87, 80, 62],
    [18, 22, 37, 56, 68, 109, 103, 77],
    [24, 35, 55, 64, 81, 104, 113, 92],
    [49, 64, 78, 87, 103, 121, 120, 101],
    [72, 92, 95, 98, 112, 100, 103, 99]], np.float32)

CHROMA_TABLE = np.full((8, 8), 99, np.float32)
CHROMA_TABLE[:4, :4] = [[17, 18, 24, 47], [18, 21, 26, 66], [24, 26, 56, 99], [47, 66, 99, 99]]

_YCBCR = np.array([[0.299, 0.587, 0.114],
                   [-0.168736, -0.331264, 0.5],
                   [0.5, -0.418688, -0.081312]], np.float32)


def quant_table(base: np.ndarray, quality: int) -> np.ndarray:
    """Scale a base table for `quality` in 1..100 (IJG rule), entries clamped to 1..255."""
    q = int(np.clip(quality, 1, 100))
    scale = 5000 / q if q < 50 else 200 - 2 * q
    return np.clip(np.floor((base * scale + 50) / 100), 1, 255).astype(np.float32)


def dct_matrix(n: int = 8) -> np.ndarray:
    """Orthonormal DCT-II matrix D: coefficients = D @ block @ D.T."""
    k = np.arange(n)[:, None]
    i = np.arange(n)[None, :]
    d = np.cos(np.pi * (2 * i + 1) * k / (2 * n)) * np.sqrt(2.0 / n)
    d[0] /= np.sqrt(2.0)
    return d.astype(np.float32)


def _blocks_roundtrip(plane: np.ndarray, table: np.ndarray) -> np.ndarray:
    """DCT-quantize-IDCT every 8x8 block of (N, H, W) planes in the 0..255 range."""
    n, h, w = plane.shape
    hp, wp = -(-h // 8) * 8, -(-w // 8) * 8
    p = np.pad(plane, ((0, 0), (0, hp - h), (0, wp - w)), mode="edge") - 128.0
    blocks = p.reshape(n, hp // 8, 8, wp // 8, 8)
    d = dct_matrix()
    # blocks axes: image n, block row b, row in block i, block column c, column in block j
    coef = np.einsum("ui,nbicj,vj->nbucv", d, blocks, d, optimize=True)
    coef = np.round(coef / table[None, None, :, None, :]) * table[None, None, :, None, :]
    back = np.einsum("ui,nbucv,vj->nbicj", d, coef, d, optimize=True)
    return (back.reshape(n, hp, wp) + 128.0)[:, :h, :w]


def jpeg_compression(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Compress and decompress every image at the severity's JPEG quality."""
    quality = JPEG_QUALITY[severity - 1]
    v = np.round(x * 255.0).astype(np.float32)
    if x.shape[3] == 1:
        out = _blocks_roundtrip(v[..., 0], quant_table(LUMA_TABLE, quality))[..., None]
    else:
        ycc = v @ _YCBCR.T + np.array([0.0, 128.0, 128.0], np.float32)
        tables = (quant_table(LUMA_TABLE, quality), quant_table(CHROMA_TABLE, quality),
                  quant_table(CHROMA_TABLE, quality))
        ycc = np.stack([_blocks_roundtrip(ycc[..., i], tables[i]) for i in range(3)], axis=-1)
        out = (ycc - np.array([0.0, 128.0, 128.0], np.float32)) @ np.linalg.inv(_YCBCR).T
    return (np.round(np.clip(out, 0, 255)) / 255.0).astype(np.float32)
