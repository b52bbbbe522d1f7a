"""Exact integer GEMM through floating-point BLAS.

numpy has no BLAS for integer matrices (an int32/int64 matmul runs a naive
loop, several times slower than float64 BLAS). But a product of two integers
summed in floating point is exact as long as every value that ever appears —
each product and each partial sum, in whatever order and blocking the BLAS
chooses, FMA included — is an integer of magnitude at most 2^24 (float32) or
2^53 (float64): such integers are representable, so no operation rounds.

Every partial sum of row i of `a` times column j of `b` is a sum of a subset of
the products a[i,k] * b[k,j], so its magnitude is at most

    bound = max_i |a[i,:]|_inf * max_j |b[:,j]|_1

(the largest activation magnitude times the largest column L1 norm of the
weights). `gemm_dtype(bound)` picks float32 when bound <= 2^24, float64 when
bound <= 2^53, and int64 as the last resort; all three give identical results.

For an int8 layer with x - z_x in [-255, 255] and weights in [-127, 127] the
shape-only bound is K * 255 * 127, i.e. float32 for K <= 518; the L1 form is
much tighter for real weights (typically float32 up to K of a few thousand).
"""

from __future__ import annotations

import numpy as np

F32_EXACT = 1 << 24
"""Largest magnitude below which every integer is a float32 (2^24 itself included)."""
F64_EXACT = 1 << 53
"""The same for float64."""


def gemm_dtype(bound: int) -> np.dtype:
    """The cheapest dtype whose matmul is exact when no partial sum exceeds `bound`."""
    if bound <= F32_EXACT:
        return np.dtype(np.float32)
    if bound <= F64_EXACT:
        return np.dtype(np.float64)
    return np.dtype(np.int64)


def column_l1_max(w: np.ndarray) -> int:
    """max over output channels c of sum_k |w[c, k]| for weights shaped (C, ...)."""
    if w.size == 0:
        return 0
    return int(np.abs(w.reshape(w.shape[0], -1).astype(np.int64)).sum(axis=1).max())


def exact_matmul(a: np.ndarray, b: np.ndarray, bound: int) -> np.ndarray:
    """a @ b for integer-valued a (..., M, K) and b (..., K, N), exactly, as int64.

    `bound` must bound every partial sum (see the module docstring); `a` and
    `b` may already be in the dtype `gemm_dtype(bound)` picks, which avoids
    a copy. Batched (leading) dimensions broadcast as in `np.matmul`.
    """
    dt = gemm_dtype(bound)
    out = np.matmul(a.astype(dt, copy=False), b.astype(dt, copy=False))
    return out.astype(np.int64) if dt != np.int64 else out


def exact_matmul_keep(a: np.ndarray, b: np.ndarray, bound: int) -> np.ndarray:
    """``a @ b`` of integer-valued operands, exact, left in `gemm_dtype(bound)` (no int64 copy).

    For a consumer that takes exact integers in a float dtype (`requantize_products`): the
    int64 conversion of `exact_matmul` would cost as much again as a float32 GEMM's output.
    """
    dt = gemm_dtype(bound)
    return np.matmul(a.astype(dt, copy=False), b.astype(dt, copy=False))


def split_k_chunk(k: int, a_max: int, b_max: int) -> int:
    """The largest divisor c of K with c * a_max * b_max <= 2^24 (0 when even c = 1 is too long)."""
    limit = min(k, F32_EXACT // max(a_max * b_max, 1))
    for c in range(limit, 0, -1):
        if k % c == 0:
            return c
    return 0


def exact_matmul_split_k(a: np.ndarray, b: np.ndarray, a_max: int, b_max: int,
                         min_chunk: int = 64) -> np.ndarray:
    """a (M, K) @ b (K, N) for integer-valued a, b with |a| <= a_max, |b| <= b_max, exactly, as float64.

    For a long reduction (weight gradients sum over every position of the batch)
    the whole-K bound K * a_max * b_max calls for float64, but a chunk of c steps
    with c * a_max * b_max <= 2^24 is exact in float32: K is cut into K / c chunks
    (c the largest divisor of K under that limit, no padding copy), one batched
    float32 GEMM gives every chunk's exact partial product, and float64 adds them
    exactly (|total| <= K * a_max * b_max < 2^53). float32 BLAS runs 3-4x faster
    than float64 here and the operands need no float64 copies. Chunks shorter than
    `min_chunk` (a K with no good divisor) fall back to one float64 GEMM.
    """
    k = a.shape[-1]
    if k * a_max * b_max > F64_EXACT:
        return exact_matmul(a, b, k * a_max * b_max).astype(np.float64)
    c = split_k_chunk(k, a_max, b_max)
    if c < min_chunk and c != k:
        return np.matmul(a.astype(np.float64, copy=False), b.astype(np.float64, copy=False))
    a32, b32 = a.astype(np.float32, copy=False), b.astype(np.float32, copy=False)
    if c == k:
        return np.matmul(a32, b32).astype(np.float64)
    m, n, nc = a.shape[0], b.shape[1], k // c
    a3 = a32.reshape(m, nc, c).transpose(1, 0, 2)    # (nc, M, c)
    b3 = b32.reshape(nc, c, n)                       # (nc, c, N)
    return np.matmul(a3, b3).sum(0, dtype=np.float64)


def exact_matmul_wide(a: np.ndarray, b: np.ndarray, bound: int, a_max: int, b_max: int) -> np.ndarray:
    """a (..., M, K) @ b (..., K, N) exactly as int64, also when partial sums pass 2^53.

    Up to `bound` <= 2^53 this is `exact_matmul`. Past it, an int64 matmul
    would be exact but runs no BLAS (tens of times slower), so K is cut into
    chunks of c steps with ``c * a_max * b_max <= 2^53`` (|a| <= a_max,
    |b| <= b_max elementwise): each chunk's float64 GEMM is exact, and the
    chunk products are summed in int64. `a` and `b` should be float64 already.
    """
    if bound <= F64_EXACT:
        return exact_matmul(a, b, bound)
    c = F64_EXACT // max(a_max * b_max, 1)
    k = a.shape[-1]
    if c < 1:
        return np.matmul(a.astype(np.int64), b.astype(np.int64))
    nc = -(-k // c)
    pad = nc * c - k
    a64 = np.asarray(a, np.float64)
    b64 = np.asarray(b, np.float64)
    if pad:
        a64 = np.concatenate([a64, np.zeros((*a64.shape[:-1], pad))], axis=-1)
        b64 = np.concatenate([b64, np.zeros((*b64.shape[:-2], pad, b64.shape[-1]))], axis=-2)
    a3 = np.moveaxis(a64.reshape(*a64.shape[:-1], nc, c), -2, -3)         # (..., nc, M, c)
    b3 = b64.reshape(*b64.shape[:-2], nc, c, b64.shape[-1])               # (..., nc, c, N)
    return np.matmul(a3, b3).astype(np.int64).sum(axis=-3)
