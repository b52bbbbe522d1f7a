"""Dynamic partial gradient updates: per sample and layer, train only the top-k structures.

Seed A (Deutel et al., IEEE TCAD 2025, and its follow-up): a structure is a
conv filter or a linear row; per sample they are ranked by the magnitude of
their output error, and only the top

    k = max(floor(min(lambda_min + r * (lambda_max - lambda_min), 1) * N), 1)

are kept, with r = loss of the sample / largest sample loss seen so far in
training. The errors of the other structures are dropped (set to real 0),
which also shrinks the error propagation into the layer below.

Every float operation is float32 in the order written in `keep_counts`;
ranking ties go to the lower structure index (a stable sort), so a C loop
that keeps the k largest with `>` comparisons in index order agrees.

Example:
    >>> p = PartialPolicy(0.1, 1.0)
    >>> p.keep_counts(np.array([100, 50]), 100, 10).tolist()
    [10, 5]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PartialPolicy:
    """lambda_min <= lambda_max in [0, 1]; lambda_min = 1 trains every structure."""

    lambda_min: float = 1.0
    lambda_max: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.lambda_min <= self.lambda_max <= 1.0:
            raise ValueError(f"partial update needs 0 <= lambda_min <= lambda_max <= 1, got "
                             f"lambda_min={self.lambda_min}, lambda_max={self.lambda_max}")

    @property
    def active(self) -> bool:
        return self.lambda_min < 1.0

    def keep_counts(self, sample_loss: np.ndarray, loss_max: int, n: int) -> np.ndarray:
        """k per sample (int64) for a layer of `n` structures.

        float32, in order: r = float32(loss_b) / float32(loss_max);
        lam = lambda_min + r * (lambda_max - lambda_min); lam = min(lam, 1);
        k = max(floor(lam * n), 1). Losses are the integer Q16 sample losses.
        """
        lo, hi = np.float32(self.lambda_min), np.float32(self.lambda_max)
        den = np.float32(max(int(loss_max), 1))
        r = np.abs(np.asarray(sample_loss).astype(np.float32)) / den
        lam = np.minimum(lo + r * (hi - lo), np.float32(1))
        k = np.floor(lam * np.float32(n)).astype(np.int64)
        return np.clip(k, 1, n)


def magnitudes(ec: np.ndarray) -> np.ndarray:
    """Per sample and structure (last axis), the sum of |centred error| over positions.

    Exact int64 for integer errors; float32 summed over positions in row-major
    order for float errors.
    """
    n, o = ec.shape[0], ec.shape[-1]
    a = np.abs(ec.reshape(n, -1, o))
    if a.dtype.kind == "f":           # sequential over positions (ufunc.accumulate), as a C loop
        return (np.add.accumulate(a.astype(np.float32), axis=1)[:, -1] + np.float32(0)).astype(np.float32)
    p = a.shape[1]
    af = a.astype(np.float32)                              # exact: integers below 2^24
    if a.size and p * int(af.max()) <= 1 << 24:
        # NOTE: every partial sum is an integer of at most 2^24, exact in float32 in any order:
        # a batched GEMV with ones runs several times faster than an int64 sum over positions.
        return np.matmul(np.ones((1, p), np.float32), af)[:, 0].astype(np.int64)
    return a.sum(1, dtype=np.int64)


def top_k_mask(mag: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Boolean (N, O): the k[b] largest magnitudes of each sample, ties to the lower index."""
    return top_k(mag, k)[0]


def top_k(mag: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`top_k_mask` and the ranking (N, O): structure indices by decreasing magnitude, so each
    sample's first k[b] entries are its kept structures and the next ones pruned ones."""
    order = np.argsort(-mag, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(mag.shape[1])[None, :].repeat(len(mag), 0), axis=1)
    return rank < k[:, None], order
