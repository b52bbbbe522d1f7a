"""The zeroth-order gradient estimator in the integer domain: weight and node perturbation.

Zhao et al., "Poor Man's Training on MCUs" (ACM TODAES 2025): integer
Rademacher perturbations ``u`` in {-1, +1} scaled by ``sigma`` quantization
steps, a one-sided forward difference over ``n`` queries, and a shrink of the
estimate by ``gamma`` (the "GNS" factor; without it training diverges):

- weight perturbation (WP) of a unit with ``d`` integer parameters:
  ``g = gamma / (n sigma) * sum_i [L(theta + sigma u_i) - L(theta)] u_i``,
  ``gamma = n / (n + d - 1)``;
- node perturbation (NP) of a layer's int8 output y (B x d_out), only where y
  is not saturated (the STE mask m), with per-sample losses:
  ``g_y[b] = gamma / (n sigma) * sum_i [l_b(y + sigma u_i) - l_b(y)] u_i[b] * m[b]``,
  ``gamma = B n / (B n + d_out - 1)``; the weight gradient is then the exact
  local product with the layer's stored input: ``g_W = sum (x - z_x) * g_acc``,
  ``g_acc = g_y * M_c`` (``M_c = s_x s_w[c] / s_y``, the requantization slope).

Everything up to the final scaling is integer: losses are int32 Q16 from the
integer softmax cross-entropy, and the estimator keeps the exact int64 sums
``S = sum_i dL_i u_i`` (NP: ``P = sum (x - z_x) * G_y``). The scalar factors
(``gamma``, ``1 / (n sigma B)``, ``2^-16``, ``M_c``) go into one float32
coefficient per channel, ``g_int = coef * S``, applied by the QAS update.

Stream order (the C twin replays it): per unit in step order, per query
i = 0..n-1, the unit's perturbation vector; WP: for each layer of the unit in
graph order, its weight in OHWI C order, then its bias; NP: the
(B, *out_shape) output in C order. The vector's signs are packed 32 per
xorshift32 draw (`XorShift32.rademacher_packed`: element e is ``-1`` when bit
``e mod 32`` of draw ``e div 32`` is set), each query starting on a fresh
draw. Masked elements still consume their bit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mcutrain.methods import zo_forward as zf
from mcutrain.methods.zo_local_grad import local_weight_grad
from mcutrain.qmodel import QuantModel
from mcutrain.quant.loss import LOSS_FRAC_BITS, int_softmax_cross_entropy
from mcutrain.quant.rng import XorShift32

LOSS_SCALE = np.float32(2.0**-LOSS_FRAC_BITS)
QUERY_CHUNK_ELEMENTS = 1 << 22
"""Default tensor elements of one chunk of stacked queries. NOTE: glibc serves an allocation above
its mmap threshold (at most 32 MB) with fresh pages and returns them when freed, so a chunk whose
work arrays pass it (an im2col of the stacked batch is 9x its input) pays its page faults again on
every chunk: at 2^24 a small-cnn step at batch 32 spent 5-12 ms of system time in them, at 2^22
none, and its arrays still fill BLAS's blocks."""


@dataclass(frozen=True)
class ZOUnit:
    """One perturbation unit of a step: what is perturbed, what is cached, what re-runs.

    The planner reads these: each query re-runs `rerun` (per-sample MACs
    `tail_macs`) on the batch, reading `cached` tensors of the base pass.
    """

    kind: str                      # "wp" or "np"
    layers: tuple[str, ...]        # WP: the perturbed layers (several = model-wise); NP: one layer
    dim: int                       # d of the GNS shrink (WP: parameters; NP: per-sample outputs)
    draws_per_query: int           # xorshift32 draws per query (32 signs each)
    cached: tuple[str, ...]        # base-pass tensors the queries and the gradient recovery read
    rerun: tuple[str, ...]         # nodes each query evaluates again
    tail_macs: int                 # per-sample MACs of one query's partial forward pass


def make_unit(qm: QuantModel, kind: str, layers: tuple[str, ...]) -> ZOUnit:
    g = qm.graph
    nodes = [g.node(n) for n in layers]
    if kind == "wp":
        dim = sum(int(qm.weights[n].size + qm.biases[n].size) for n in layers)
        draws = -(-dim // 32)                         # 32 signs per draw
        perturbed = set(layers)
        cached = (nodes[0].inputs[0],)
    elif kind == "np":
        if len(layers) != 1:
            raise ValueError("node perturbation acts on one layer at a time")
        dim = int(np.prod(g.shape(layers[0])))
        draws = -1                                    # ceil(B * dim / 32): set per batch
        perturbed = set(layers)
        cached = (nodes[0].inputs[0], layers[0])
    else:
        raise ValueError(f"unknown perturbation kind {kind!r} (wp, np)")
    rerun = [n.name for n in zf.affected_nodes(qm, perturbed)]
    if kind == "np":
        rerun = rerun[1:]                             # the layer's own output is perturbed, not recomputed
    macs = sum(g.macs(g.node(n)) for n in rerun)
    return ZOUnit(kind, tuple(layers), dim, draws, cached, tuple(rerun), macs)


def gns_gamma(numer: int, dim_minus_one: int, enabled: bool = True) -> np.float32:
    """float32 ``numer / (numer + dim - 1)`` (1 when GNS is off); numer = n (WP) or B n (NP)."""
    if not enabled:
        return np.float32(1.0)
    return np.float32(numer) / np.float32(numer + dim_minus_one)


def per_sample_loss(qm: QuantModel, logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """int64 per-sample Q16 losses of int8 logits (integer softmax cross-entropy)."""
    qp = qm.act_qparams[qm.graph.output]
    loss, _ = int_softmax_cross_entropy(logits, float(qp.scale), int(qp.zero_point), labels)
    return loss.astype(np.int64)


@dataclass
class IntGrad:
    """A layer's estimated gradient of its integer tensors: ``g_int = coef[c] * sum`` per channel."""

    w_sum: np.ndarray              # int64, the weight's shape
    b_sum: np.ndarray              # int64 (O,)
    w_coef: np.ndarray             # float32 (O,)
    b_coef: np.ndarray             # float32 (O,)
    extra: dict = field(default_factory=dict)

    def w_grad(self) -> np.ndarray:
        """float64 gradient of the int8 weight (for scores and tests, not for the update)."""
        c = self.w_coef.astype(np.float64).reshape((-1,) + (1,) * (self.w_sum.ndim - 1))
        return self.w_sum.astype(np.float64) * c


def forward_difference(f, theta: np.ndarray, sigma: int, n: int, rng: XorShift32,
                       gns: bool = True) -> tuple[np.ndarray, np.float32]:
    """The WP estimator on any integer function: ``(S, gamma)`` with ``g = gamma S / (n sigma)``.

    ``f`` maps stacked integer parameter vectors (Q, d) to integer losses
    (Q,); ``S = sum_i [f(theta + sigma u_i) - f(theta)] u_i`` exactly in int64.
    The same sums and stream order as `estimate_wp` (which feeds it the
    network's batch loss); used directly for toy problems.
    """
    d = theta.size
    u = rng.rademacher_packed(n, d).astype(np.int64)
    f0 = np.asarray(f(theta.reshape(1, d).astype(np.int64)), np.int64)
    dl = np.asarray(f(theta.reshape(1, d).astype(np.int64) + sigma * u), np.int64) - f0
    return dl @ u, gns_gamma(n, d - 1, gns)


INT32_SUM_LIMIT = 2**31 - 1
"""Largest |sum| an int32 contraction may reach; the estimators switch to wider sums past it."""

NP_INT32_QUERIES = 127
"""Most queries whose node sums fit int32: ``127 * 2^24 < 2^31`` (as the C kernel's sums)."""


def _chunk_queries(n: int, per_query_elements: int, budget: int) -> int:
    return int(max(1, min(n, budget // max(per_query_elements, 1))))


def signed_sum(dl: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Exact int64 ``sum_q dl[q] u[q, :]`` for int64 dl (Q,) and u (Q, d) in {-1, 0, 1} (int8 or uint8).

    An int32 contraction (several times faster than int64) when every partial
    sum fits, ``Q max|dl| < 2^31`` (small loss changes, the common case), else
    ``dl = 2^16 hi + lo`` in two int32 contractions; the integers are the same.
    """
    q = len(dl)
    if q * int(np.abs(dl).max(initial=0)) <= INT32_SUM_LIMIT:
        return np.einsum("q,qd->d", dl.astype(np.int32), u).astype(np.int64)
    hi = dl >> 16                                      # lo = dl & 0xFFFF in [0, 2^16)
    if q * max(int(np.abs(hi).max(initial=0)), 0xFFFF) > INT32_SUM_LIMIT:
        return np.einsum("q,qd->d", dl, u)
    lo = (dl & 0xFFFF).astype(np.int32)
    return (np.einsum("q,qd->d", hi.astype(np.int32), u).astype(np.int64) << 16) + np.einsum("q,qd->d", lo, u)


def perturbed_params(w: np.ndarray, b: np.ndarray, u_w: np.ndarray, u_b: np.ndarray,
                     sigma_w: int, sigma_b: int) -> tuple[np.ndarray, np.ndarray]:
    """``clamp(W + sigma_w u, -127, 127)`` int8 and ``sat32(b + sigma_b u)`` int32, stacked per query."""
    sw = np.int16(min(sigma_w, 255))               # any larger step clamps the same way
    wq = np.clip(w[None].astype(np.int16) + sw * u_w, -127, 127).astype(np.int8)
    bq = np.clip(b[None].astype(np.int64) + np.int64(sigma_b) * u_b, -(2**31), 2**31 - 1).astype(np.int32)
    return wq, bq


def perturbed_bounds(w: np.ndarray, b: np.ndarray, sigma_w: int, sigma_b: int) -> zf.ChannelBounds:
    """Per-channel upper bounds of sum |W'| and |b'| over every `perturbed_params` set of (w, b)."""
    aw = np.minimum(np.abs(w.reshape(len(w), -1).astype(np.int64)) + abs(int(sigma_w)), 127)
    return aw.sum(axis=1), np.abs(b.astype(np.int64)) + abs(int(sigma_b))


@dataclass(frozen=True)
class QueryShare:
    """How a step's queries of every unit are shared with worker processes (`zo_workers`).

    `parts` are contiguous query ranges in query order; this process evaluates part 0 and
    `remote(k)` returns part k's loss changes of the current unit (blocking until they arrive).
    The sums run here, in query order, over every part, so the integers do not depend on it.
    """

    parts: tuple[tuple[int, int], ...]
    remote: Callable[[int], np.ndarray]


def _chunks(n: int, qc: int, share: QueryShare | None):
    """(q0, q, remote losses or None) of each chunk: at most `qc` queries, never across a part."""
    parts = ((0, n),) if share is None else share.parts
    for k, (lo, hi) in enumerate(parts):
        remote = None if k == 0 or share is None else share.remote(k)
        for q0 in range(lo, hi, qc):
            q = min(qc, hi - q0)
            yield q0, q, None if remote is None else remote[q0 - lo:q0 - lo + q]


class _WPQueries:
    """A WP unit's queries at the current weights: the loss changes of a chunk from its sign bits."""

    def __init__(self, qm: QuantModel, base: dict[str, np.ndarray], labels: np.ndarray, l0: np.ndarray,
                 unit: ZOUnit, n: int, sigma_w: int, sigma_b: int,
                 masks: dict[str, tuple[np.ndarray, np.ndarray]] | None, budget: int) -> None:
        self.qm, self.base, self.labels, self.l0, self.unit = qm, base, labels, l0, unit
        self.sigma_b, self.masks = sigma_b, masks
        self.sizes = [(qm.weights[m].size, qm.biases[m].size) for m in unit.layers]
        self.qc = _chunk_queries(n, len(labels) * zf.tail_elements(qm, set(unit.layers)) + unit.dim, budget)
        self.plus, self.flip = _weight_choices(qm, unit.layers, sigma_w, masks)
        self.bounds = {m: perturbed_bounds(qm.weights[m], qm.biases[m], sigma_w, sigma_b)
                       for m in unit.layers}
        self.w_buf = np.empty((min(self.qc, n), self.plus.size), np.uint8)   # reused by every chunk
        self.labels_q: np.ndarray | None = None

    def losses(self, bits: np.ndarray) -> np.ndarray:
        """int64 (q,): each query's summed loss change ``sum_b l_b(theta + sigma u) - l_b(theta)``."""
        qm, q, bsz = self.qm, len(bits), len(self.labels)
        rows = np.multiply(bits, self.flip, out=self.w_buf[:q])
        rows = np.bitwise_xor(rows, self.plus, out=rows).view(np.int8)          # every weight, +-sigma
        producers, off = {}, 0
        for m, (nw, nb) in zip(self.unit.layers, self.sizes):
            wq = rows[:, off:off + nw].reshape(q, *qm.weights[m].shape)
            ub = 1 - 2 * bits[:, off + nw:off + nw + nb].astype(np.int64)
            off += nw + nb
            if self.masks is not None and m in self.masks:
                ub = ub * self.masks[m][1]
            bq = np.clip(qm.biases[m][None].astype(np.int64) + np.int64(self.sigma_b) * ub,
                         -(2**31), 2**31 - 1).astype(np.int32)
            producers[m] = zf.WeightSets(qm, qm.graph.node(m), wq, bq, self.bounds[m])
        if self.labels_q is None or len(self.labels_q) != q * bsz:
            self.labels_q = np.tile(self.labels, q)
        logits = zf.run_queries(qm, self.base, q, producers)
        return (per_sample_loss(qm, logits, self.labels_q).reshape(q, bsz) - self.l0[None]).sum(axis=1)


def estimate_wp(qm: QuantModel, base: dict[str, np.ndarray], labels: np.ndarray, l0: np.ndarray,
                unit: ZOUnit, rng: XorShift32, n: int, sigma_w: int, sigma_b: int, gns: bool,
                masks: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
                budget: int = QUERY_CHUNK_ELEMENTS, share: QueryShare | None = None) -> dict[str, IntGrad]:
    """WP estimate of every layer of `unit`; draws ``n * unit.dim`` values from `rng`.

    `masks` (optional, per layer: 0/1 arrays shaped like weight and bias)
    restrict the perturbation to chosen entries (random-k sparse training);
    the GNS dimension is then the number of perturbed entries. `share`: the queries
    of parts past the first come from worker processes (`QueryShare`).
    """
    bsz = len(labels)
    d = unit.dim
    active = d if masks is None else int(sum(int(mw.sum() + mb.sum()) for mw, mb in masks.values()))
    queries = _WPQueries(qm, base, labels, l0, unit, n, sigma_w, sigma_b, masks, budget)
    s_tot = np.zeros(d, np.int64)
    for _, q, remote in _chunks(n, queries.qc, share):     # chunks of queries (memory), not single queries
        bits = rng.sign_bits(q, d, whole_words=True)                      # u = 1 - 2 bit
        dl = queries.losses(bits) if remote is None else remote
        s_tot -= 2 * signed_sum(dl, bits[:, :d])                # sum_q dl u = D - 2 sum_q dl bit
        s_tot += dl.sum()
    gamma = gns_gamma(n, active - 1, gns)
    out, off = {}, 0
    for m, (nw, nb) in zip(unit.layers, queries.sizes):
        o = qm.weights[m].shape[0]
        sw = s_tot[off:off + nw].reshape(qm.weights[m].shape)
        sb = s_tot[off + nw:off + nw + nb]
        off += nw + nb
        if masks is not None and m in masks:
            sw = sw * masks[m][0]
            sb = sb * masks[m][1]
        cw = (gamma / np.float32(n * sigma_w * bsz)) * LOSS_SCALE
        cb = (gamma / np.float32(n * sigma_b * bsz)) * LOSS_SCALE
        out[m] = IntGrad(sw, sb, np.full(o, cw, np.float32), np.full(o, cb, np.float32),
                         {"gamma": float(gamma), "dim": active})
    return out


def wp_losses(qm: QuantModel, base: dict[str, np.ndarray], labels: np.ndarray, l0: np.ndarray,
              unit: ZOUnit, rng: XorShift32, n: int, sigma_w: int, sigma_b: int,
              masks: dict[str, tuple[np.ndarray, np.ndarray]] | None, budget: int,
              part: tuple[int, int]) -> np.ndarray:
    """A worker's share of `estimate_wp`: the loss changes (int64) of queries ``lo <= i < hi``.

    `rng` jumps over the other queries' draws, so it ends where `estimate_wp` leaves it.
    """
    lo, hi = part
    queries = _WPQueries(qm, base, labels, l0, unit, n, sigma_w, sigma_b, masks, budget)
    rng.advance(lo * unit.draws_per_query)
    out = [queries.losses(rng.sign_bits(min(queries.qc, hi - q0), unit.dim, whole_words=True))
           for q0 in range(lo, hi, queries.qc)]
    rng.advance((n - hi) * unit.draws_per_query)
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def saturation_mask(qm: QuantModel, layer: str, y: np.ndarray) -> np.ndarray:
    """STE mask: 1 where the layer's int8 output lies strictly inside its clamp range."""
    lo, hi = qm.act_range(layer)
    return ((y > lo) & (y < hi)).astype(np.int8)


class _NPQueries:
    """An NP unit's queries at the current weights: the per-sample loss changes of a chunk from its bits."""

    def __init__(self, qm: QuantModel, base: dict[str, np.ndarray], labels: np.ndarray, l0: np.ndarray,
                 unit: ZOUnit, n: int, sigma: int, channel_mask: np.ndarray | None, budget: int) -> None:
        self.qm, self.base, self.labels, self.l0 = qm, base, labels, l0
        self.layer = unit.layers[0]
        y = base[self.layer]
        bsz = len(labels)
        self.mask = saturation_mask(qm, self.layer, y)
        if channel_mask is not None:
            self.mask = self.mask * channel_mask.astype(np.int8)
        self.nel = bsz * unit.dim
        self.words = -(-self.nel // 32)
        per_query = bsz * (zf.tail_elements(qm, {self.layer}) + 2 * unit.dim)
        self.qc = min(_chunk_queries(n, per_query, budget), NP_INT32_QUERIES)
        self.y_plus, self.flip = _node_choices(y.reshape(-1), self.mask.reshape(-1), sigma,
                                               qm.act_range(self.layer))
        # reused by every chunk: a fresh multi-megabyte array per chunk pays its page faults again
        self.yp_buf = np.empty((min(self.qc, n), self.y_plus.size), np.uint8)
        self.labels_q: np.ndarray | None = None

    def losses(self, bits: np.ndarray) -> np.ndarray:
        """int32 (q, B): each query's per-sample loss changes (``|dl| < 2^24``)."""
        q, bsz, y = len(bits), len(self.labels), self.base[self.layer]
        yp = np.multiply(bits, self.flip, out=self.yp_buf[:q])
        yp = np.bitwise_xor(yp, self.y_plus, out=yp).view(np.int8)             # y_plus or y_minus
        yp = yp[:, :self.nel].reshape(q, bsz, *y.shape[1:])
        if self.labels_q is None or len(self.labels_q) != q * bsz:
            self.labels_q = np.tile(self.labels, q)
        logits = zf.run_queries(self.qm, self.base, q, {self.layer: lambda x: yp})
        dl = per_sample_loss(self.qm, logits, self.labels_q).reshape(q, bsz) - self.l0[None]
        return dl.astype(np.int32)


def estimate_np(qm: QuantModel, base: dict[str, np.ndarray], labels: np.ndarray, l0: np.ndarray,
                unit: ZOUnit, rng: XorShift32, n: int, sigma: int, gns: bool,
                channel_mask: np.ndarray | None = None, budget: int = QUERY_CHUNK_ELEMENTS,
                share: QueryShare | None = None) -> dict[str, IntGrad]:
    """NP estimate of `unit`'s layer: node gradient, then the exact local weight gradient.

    Draws ``n * ceil(B * d_out / 32)`` values (32 signs per draw). `channel_mask`
    (0/1 per output channel) restricts perturbation to chosen channels
    (top-k / random-k sparse NP). `share`: as `estimate_wp`'s.

    The signs stay bits (`XorShift32.sign_bits` of whole draws): a perturbed
    element is one of two values (``clamp(y +- sigma m)``), picked by its bit
    as ``y_plus ^ bit * (y_plus ^ y_minus)``, and the node sum is
    ``sum_i dl_i u_i = D - 2 sum_i dl_i bit_i`` with ``D = sum_i dl_i``, an
    int32 contraction over the chunk's queries (exact: ``|dl| < 2^24``, at
    most `NP_INT32_QUERIES` queries per chunk); the saturation mask
    multiplies the sum once.
    """
    layer = unit.layers[0]
    node = qm.graph.node(layer)
    y = base[layer]
    bsz = len(labels)
    d_out = unit.dim
    active = d_out if channel_mask is None else d_out // len(channel_mask) * int(channel_mask.sum())
    queries = _NPQueries(qm, base, labels, l0, unit, n, sigma, channel_mask, budget)
    nel = queries.nel
    s_sum, s_bound = None, 0                 # s_sum stays int32 while its bound sum_q |dl| fits
    d_sum = np.zeros(bsz, np.int64)
    part_buf = np.empty((bsz, d_out), np.int32)
    for _, q, remote in _chunks(n, queries.qc, share):
        bits = rng.sign_bits(q, nel, whole_words=True)                         # (q, 32 ceil(nel / 32))
        dl = queries.losses(bits) if remote is None else remote                # (q, B) int32
        # sum_q dl[q, b] bit[q, b, j]: one int32 contraction over the queries
        part = np.einsum("qb,qbj->bj", dl, bits[:, :nel].reshape(q, bsz, d_out),
                         out=part_buf if s_sum is not None else None)
        d_sum += dl.sum(axis=0, dtype=np.int64)
        s_bound += q * int(np.abs(dl).max(initial=0))
        if s_sum is None:
            s_sum = part
        elif s_sum.dtype == np.int32 and s_bound <= INT32_SUM_LIMIT:
            s_sum += part
        else:
            s_sum = s_sum.astype(np.int64, copy=False)
            s_sum += part
    if s_sum is None:                        # no queries
        s_sum = np.zeros((bsz, d_out), np.int32)
    gy = np.multiply(s_sum, -2, dtype=np.int64)
    gy += d_sum[:, None]
    gy *= queries.mask.reshape(bsz, d_out)
    gy_int = gy.reshape(y.shape)
    gamma = gns_gamma(bsz * n, active - 1, gns)
    w_sum, b_sum = local_weight_grad(qm, layer, base[node.inputs[0]], gy_int)
    s_x = qm.scale(node.inputs[0])
    s_w = np.broadcast_to(qm.weight_qparams[layer].scale, (qm.weights[layer].shape[0],)).astype(np.float32)
    slope = ((np.float32(s_x) * s_w) / np.float32(qm.scale(layer))).astype(np.float32)   # M_c
    c0 = (gamma / np.float32(n * sigma * bsz)) * LOSS_SCALE
    coef = (np.float32(c0) * slope).astype(np.float32)
    return {layer: IntGrad(w_sum, b_sum, coef, coef.copy(),
                           {"gamma": float(gamma), "dim": active, "node_grad": gy_int})}


def np_losses(qm: QuantModel, base: dict[str, np.ndarray], labels: np.ndarray, l0: np.ndarray,
              unit: ZOUnit, rng: XorShift32, n: int, sigma: int, channel_mask: np.ndarray | None,
              budget: int, part: tuple[int, int]) -> np.ndarray:
    """A worker's share of `estimate_np`: the per-sample loss changes (int32 (hi - lo, B)) of its queries."""
    lo, hi = part
    queries = _NPQueries(qm, base, labels, l0, unit, n, sigma, channel_mask, budget)
    rng.advance(lo * queries.words)
    out = [queries.losses(rng.sign_bits(min(queries.qc, hi - q0), queries.nel, whole_words=True))
           for q0 in range(lo, hi, queries.qc)]
    rng.advance((n - hi) * queries.words)
    return np.concatenate(out) if out else np.zeros((0, len(labels)), np.int32)


def _weight_choices(qm: QuantModel, layers: tuple[str, ...], sigma_w: int,
                    masks: dict[str, tuple[np.ndarray, np.ndarray]] | None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """A WP unit's perturbed weights as bytes: ``w_plus`` and ``w_plus ^ w_minus`` (uint8).

    ``w_{plus,minus} = clamp(W +- sigma_w k, -127, 127)`` (k the 0/1 entry mask, 1 without one)
    at each layer's offset of the perturbation vector (biases' slots zero, they
    are int32), padded to whole 32-element draws, so a query's weights are
    ``(bit * flip) ^ plus`` (`perturbed_params`' values) on its whole-draw bits.
    """
    sizes = [(qm.weights[m].size, qm.biases[m].size) for m in layers]
    d = sum(a + b for a, b in sizes)
    plus, flip = np.zeros(32 * -(-d // 32), np.int8), np.zeros(32 * -(-d // 32), np.int8)
    sw, off = np.int32(np.clip(sigma_w, -255, 255)), 0          # any larger step clamps the same way
    for m, (nw, nb) in zip(layers, sizes):
        w = qm.weights[m].reshape(-1).astype(np.int32)
        step = sw if masks is None or m not in masks else sw * masks[m][0].reshape(-1).astype(np.int32)
        plus[off:off + nw] = np.clip(w + step, -127, 127)
        flip[off:off + nw] = np.clip(w - step, -127, 127)
        off += nw + nb
    flip ^= plus
    return plus.view(np.uint8), flip.view(np.uint8)


def _node_choices(y: np.ndarray, m: np.ndarray, sigma: int, act_range: tuple[int, int]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The two values of each perturbed node as bytes: ``y_plus`` and ``y_plus ^ y_minus`` (uint8).

    ``y_{plus,minus} = clamp(y +- sigma m)`` (int8, flat), padded with zeros to
    whole 32-element draws so they line up with one query's whole-draw sign bits.
    """
    lo, hi = act_range
    step = m.astype(np.int16) * np.int16(np.clip(sigma, -255, 255))   # any larger step clamps the same way
    y16 = y.astype(np.int16)
    size = 32 * -(-len(y) // 32)
    plus, flip = np.zeros(size, np.int8), np.zeros(size, np.int8)
    plus[:len(y)] = np.clip(y16 + step, lo, hi)
    flip[:len(y)] = np.clip(y16 - step, lo, hi)
    flip ^= plus
    return plus.view(np.uint8), flip.view(np.uint8)
