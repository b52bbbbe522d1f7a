"""FQT partial updates in the simulator: each sample's kept structures (filters or rows) as groups.

The dense kernels of `fqt_kernels` multiply every filter; with partial updates (seed A's dynamic
sparse gradients) only each sample's top-k structures have errors, so these twins gather the
kept filters' errors once, group samples by their (padded) keep count and run one batched GEMM
per group. Results are bit-identical to the dense kernels on the same masked errors (tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcutrain.engines.fqt_kernels import (
    INT_MODES,
    abs_max,
)
from mcutrain.engines.im2col import im2col, out_size, tap_views
from mcutrain.engines.int_gemm import F32_EXACT, F64_EXACT, gemm_dtype


@dataclass(frozen=True)
class KeptGroup:
    """Samples with the same padded keep count, and the structures each one multiplies.

    `idx[r]` lists sample `samples[r]`'s kept structures, then pruned ones up
    to the group's width: a pruned structure's errors are
    exact zeros, so its products add exact zeros to integer sums.
    """

    samples: np.ndarray
    idx: np.ndarray
    """(m, kp): sample samples[r]'s kept structures first, then pruned ones."""


def kept_widths(kept: np.ndarray) -> np.ndarray:
    """Per sample of a (N, O) keep mask, its keep count rounded up to a power of two (at most O)."""
    k = np.maximum(kept.sum(1), 1)
    return np.minimum(np.left_shift(1, np.ceil(np.log2(k)).astype(np.int64)), kept.shape[1])


def kept_groups(kept: np.ndarray, order: np.ndarray | None = None,
                width: np.ndarray | None = None) -> list[KeptGroup]:
    """Group the samples of a (N, O) keep mask by `kept_widths`.

    A few groups per layer (at most log2(O) + 1), each one batched GEMM over
    its samples; padding to powers of two wastes less than half of each
    group's products. `order` (N, O) lists each sample's kept structures
    first (as `partial.top_k` ranks them); integer sums are exact in any order.
    """
    width = kept_widths(kept) if width is None else width
    if order is None:
        order = np.argsort(~kept, axis=1, kind="stable")   # kept first, each part in index order
    return [KeptGroup(s, np.ascontiguousarray(order[s, :kp]))
            for kp in np.unique(width) for s in [np.flatnonzero(width == kp)]]


def kept_fraction(width: np.ndarray, o: int) -> float:
    """Share of the dense products the grouped kernels compute (padding included)."""
    return float(width.sum()) / max(len(width) * o, 1)


def gather_kept(ec: np.ndarray, kept: np.ndarray, groups: list[KeptGroup]) -> list[np.ndarray]:
    """Per group, the (m, kp, P) centred errors of its samples at its structures.

    Read from the unmasked errors: the padding's pruned structures are zeroed
    here, so the errors of pruned structures never need a masked copy of the
    whole tensor. One transposed copy (N, O, P) makes every gather a row copy.
    """
    n, o = kept.shape
    et = np.ascontiguousarray(ec.reshape(n, -1, o).transpose(0, 2, 1))
    out = []
    for g in groups:
        rows = g.samples[:, None]
        eg = et[rows, g.idx]
        keep = kept[rows, g.idx]
        if not keep.all():
            np.multiply(eg, keep[:, :, None], out=eg)
        out.append(eg)
    return out


def bias_grad_acc_kept(eg: list[np.ndarray], groups: list[KeptGroup], o: int) -> np.ndarray:
    """`bias_grad_acc` (integer modes, summed over the batch) from the gathered errors: int64 (O,)."""
    out = np.zeros(o, np.int64)
    for g, e in zip(groups, eg):
        np.add.at(out, g.idx.ravel(), e.sum(2, dtype=np.int64).ravel())
    return out


def _kept_gemm_dtype(eg: np.ndarray, wc: np.ndarray, e_max: int | None) -> np.dtype:
    """Cheapest exact dtype of the (P, kp) @ (kp, C) products of `_rows_for_exact_gemm`'s rule.

    Shape bound kp * max|e| * max|w|, else the data bound max over rows of
    sum_kp |e| times max|w| (row sums exact in float32 when kp * max|e| <= 2^24).
    """
    kp = eg.shape[1]
    em = abs_max(eg) if e_max is None else e_max
    wm = abs_max(wc)
    if kp * em * wm <= F32_EXACT:
        return np.dtype(np.float32)
    if kp * em <= F32_EXACT:
        l1 = np.abs(eg, dtype=np.float32).sum(1)
        if int(l1.max(initial=0)) * wm <= F32_EXACT:
            return np.dtype(np.float32)
    return gemm_dtype(kp * em * wm)


def conv2d_bwd_in_acc_kept(eg: list[np.ndarray], groups: list[KeptGroup], wc: np.ndarray,
                           in_shape: tuple[int, int, int, int], stride: tuple[int, int],
                           padding: tuple[int, int, int, int], mode: str,
                           e_max: int | None = None) -> np.ndarray:
    """`conv2d_bwd_in_acc` (dense convs, integer modes) over each sample's kept filters only.

    `eg` from `gather_kept`. The same exact integers, in float64 for "int-float"
    and int64 for "int" (exact in any order): per group and tap one batched GEMM
    (m, P, kp) @ (m, kp, C) added into the padded input error.
    """
    if mode not in INT_MODES or wc.shape[3] != in_shape[3]:
        raise ValueError("conv2d_bwd_in_acc_kept: dense convs (groups 1) in an integer mode only")
    n, h, w, c = in_shape
    kh, kw = wc.shape[1:3]
    pt, pb, pl, pr = padding
    ho, wo = out_size(h, kh, stride[0], pt + pb), out_size(w, kw, stride[1], pl + pr)
    wt = wc.transpose(1, 2, 0, 3)                           # (kh, kw, O, C)
    whole = _whole(groups, n)
    wm = abs_max(wc)
    overlap = -(-kh // stride[0]) * -(-kw // stride[1])     # taps that reach one input element
    dxp = None
    for g, e in zip(groups, eg):
        gd = _kept_gemm_dtype(e, wc, e_max)
        # NOTE: the tap adds, not the GEMMs, dominate here; they run in float32 when the data
        # bound (overlapping taps x largest row L1 of the errors x max|w|) proves every sum exact.
        ad = np.float64
        if gd == np.float32 and e.size:
            l1 = int(np.abs(e, dtype=np.float32).sum(1).max())      # exact: kp * max|e| <= 2^24
            ad = np.float32 if overlap * l1 * wm <= F32_EXACT else np.float64
        et = e.astype(gd).transpose(0, 2, 1)                # (m, P, kp)
        part = np.zeros((len(g.samples), h + pt + pb, w + pl + pr, c), ad)
        for i, j, view in tap_views(part, (kh, kw), stride, (ho, wo)):
            wg = wt[i, j].astype(gd, copy=False)[g.idx]     # (m, kp, C)
            view += np.matmul(et, wg).reshape(view.shape)
        if whole:
            dxp = part
        else:
            if dxp is None:
                dxp = np.zeros((n, *part.shape[1:]), np.float64)
            dxp[g.samples] = part
    dxp = dxp.astype(np.float64, copy=False)
    dx = dxp[:, pt:pt + h, pl:pl + w, :]
    return dx.astype(np.int64) if mode == "int" else dx


def _whole(groups: list[KeptGroup], n: int) -> bool:
    return len(groups) == 1 and len(groups[0].samples) == n


def conv2d_bwd_w_acc_kept(xc: np.ndarray, eg: list[np.ndarray], groups: list[KeptGroup],
                          w_shape: tuple[int, ...], stride: tuple[int, int],
                          padding: tuple[int, int, int, int], mode: str, per_sample: bool = False,
                          x_max: int | None = None, e_max: int | None = None,
                          cols: np.ndarray | None = None) -> np.ndarray:
    """`conv2d_bwd_w_acc` (dense convs, integer modes) for each sample's kept filters only.

    `eg` from `gather_kept`. Per group one batched GEMM (m, kp, P) @ (m, P, K)
    gives the kept filters' per-sample gradients; they are scattered into a zero
    (N, O, ...) buffer, or summed over the batch by a one-hot GEMM (exact: float64
    integers below 2^53).
    """
    if mode not in INT_MODES or w_shape[3] != xc.shape[3]:
        raise ValueError("conv2d_bwd_w_acc_kept: dense convs (groups 1) in an integer mode only")
    n = xc.shape[0]
    o, kh, kw, _ = w_shape
    if cols is None:
        cols = im2col(xc, (kh, kw), stride, padding, 0)
    k = cols.shape[1]
    p = cols.shape[0] // n
    c3 = cols.reshape(n, p, k)
    whole = _whole(groups, n)
    xm = abs_max(cols) if x_max is None else x_max
    em = max((abs_max(e) for e in eg), default=0) if e_max is None else e_max
    bound = p * xm * em                                     # of every per-sample partial sum
    dt = gemm_dtype(bound)
    parts = [np.matmul(e.astype(dt), (c3 if whole else c3[g.samples]).astype(dt, copy=False))
             for g, e in zip(groups, eg)]                   # (m, kp, K) each, exact
    if per_sample:
        out = np.zeros((n, o, k), np.int64 if mode == "int" else dt)
        for g, gg in zip(groups, parts):
            out[g.samples[:, None], g.idx] = gg
        return out.reshape(n, *w_shape)
    idx = np.concatenate([g.idx.ravel() for g in groups])
    sd = np.float64 if n * bound <= F64_EXACT else np.int64
    rows = np.concatenate([gg.reshape(-1, k) for gg in parts]).astype(sd, copy=False)
    onehot = np.zeros((o, len(idx)), sd)
    onehot[idx, np.arange(len(idx))] = 1
    total = (onehot @ rows).reshape(w_shape)                # exact: |sum| <= N * bound
    return total.astype(np.int64) if mode == "int" else total


