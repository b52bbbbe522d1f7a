"""Partial int8 forward passes for zeroth-order queries: many perturbed copies in one pass.

A ZO step evaluates the loss of Q perturbed models on the same batch. Only
the part of the network at and after the perturbed layer differs from the
unperturbed pass, so each query re-runs from there, reading the cached
tensors of the base pass (`int_engine.run`) for everything before it.

Queries are stacked on the batch axis: a tensor of the query pass has shape
(Q * B, ...), query-major (rows q*B .. q*B + B - 1 belong to query q). A
perturbed conv2d/linear computes all Q weight sets at once: one GEMM of the
shared (or per-query) input columns against the Q stacked weight matrices;
the nodes after it run on the stacked batch with the engine's kernels. No
Python loop runs over queries, samples or elements (only over layers, kernel
taps and groups).

The kernels here reuse the engine's arithmetic exactly: the same exact
integer GEMM (`int_gemm`), the same `requantize_products`, so a query's
logits equal what `int_engine.run` returns for that perturbed model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mcutrain.engines import int_engine as ie
from mcutrain.engines.im2col import im2col, out_size
from mcutrain.engines.int_gemm import exact_matmul_keep, gemm_dtype
from mcutrain.graph import Node, Op
from mcutrain.qmodel import QuantModel
from mcutrain.quant.fixedpoint import requantize_products

Producer = Callable[[np.ndarray], np.ndarray]
"""Computes a perturbed node's stacked output (Q*B, ...) from its input (Qx, B, ...), Qx in {1, Q}."""


def node_fwd(qm: QuantModel, node: Node, ins: list[np.ndarray]) -> np.ndarray:
    """One node of the int8 forward pass; conv/linear go through the multi-weight kernel."""
    if node.op in (Op.CONV2D, Op.LINEAR):
        return param_fwd_multi(qm, node, ins[0][None], qm.weights[node.name][None],
                               qm.biases[node.name][None])[0]
    return ie.run_node(qm, node, ins)


def run_base(qm: QuantModel, x_q: np.ndarray) -> dict[str, np.ndarray]:
    """Every tensor of the unperturbed int8 pass (as `int_engine.run`), through this module's kernels.

    The query kernels keep exact float accumulators and requantize them in float64
    (`_requantize_sets`); the base pass of a step uses them too, for the same integers as the
    engine's int64 path at a third of its time.
    """
    t: dict[str, np.ndarray] = {"input": x_q}
    for node in qm.graph.nodes:
        t[node.name] = node_fwd(qm, node, [t[s] for s in node.inputs])
    return t


ChannelBounds = tuple[np.ndarray, np.ndarray]
"""Per-output-channel upper bounds over every weight set: (sum_k |w[q, c, k]|, |b[q, c]|), int64 (O,)."""


def _l1_bound(x_zp: int, w: np.ndarray, b: np.ndarray, where: str,
              bounds: ChannelBounds | None = None) -> int:
    """Largest |partial sum| of the products over every channel of the Q weight sets (w: (Q, O, ...)).

    Raises like `int_engine.check_accumulator` when bias + products could
    leave the C kernel's int32 accumulator for any weight set. Upper
    `bounds` known in advance (a WP step's sets differ from one base by at
    most sigma per entry) skip the per-set sums when they already prove the
    accumulator safe; the returned bound may then be larger, which only
    picks a wider exact GEMM dtype, never other integers.
    """
    xm = ie.x_magnitude(x_zp)
    if bounds is not None:
        l1_up, b_up = bounds
        if int((xm * l1_up + b_up).max(initial=0)) <= ie.ACC_LIMIT:
            return xm * int(l1_up.max(initial=0))
    l1 = np.abs(w.reshape(w.shape[0], w.shape[1], -1).astype(np.int16)).sum(axis=2, dtype=np.int64)  # (Q, O)
    worst = int((xm * l1 + np.abs(b.astype(np.int64))).max(initial=0))
    if worst > ie.ACC_LIMIT:
        raise ie.AccumulatorOverflow(f"{where}: |bias| + max|x - z_x| * sum|w| = {worst} exceeds the "
                                     f"int32 accumulator ({ie.ACC_LIMIT}); lower sigma or the bias")
    return xm * int(l1.max(initial=0))


def param_fwd_multi(qm: QuantModel, node: Node, x: np.ndarray, w: np.ndarray,
                    b: np.ndarray, pool: Node | None = None, bounds: ChannelBounds | None = None
                    ) -> np.ndarray:
    """conv2d/linear with Q weight sets: x (Qx, B, ...) int8, w (Q, *W) int8, b (Q, O) int32.

    Returns int8 (Q, B, ...out). Qx is 1 (the shared cached input) or Q (an
    input already perturbed upstream). Every accumulator equals that of the
    engine's kernel for weight set q, so the outputs are identical.

    `pool` (a maxpool reading this conv's output, its only consumer) is fused:
    the maximum is taken over the exact accumulators before the bias and the
    requantization, which are monotone non-decreasing per channel, so
    ``pool(requant(acc + b)) == requant(pool(acc) + b)`` with a quarter (2x2
    pool) of the requantization work. The pool's output is returned.

    The accumulators stay in the exact float dtype of their GEMM and are requantized there
    (`_requantize_sets`): no int64 copy of the Q stacked accumulators is made.
    """
    q, qx, bsz = w.shape[0], x.shape[0], x.shape[1]
    zx = qm.zero_point(node.inputs[0])
    bound = _l1_bound(zx, w, b, f"node '{node.name}'", bounds)
    o = w.shape[1]
    if node.op == Op.LINEAR:
        dt = gemm_dtype(bound)
        xc = x.astype(dt) - dt.type(zx)                       # (Qx, B, I)
        if qx == 1:           # one GEMM against all Q weight sets side by side: (B, I) @ (I, Q*O)
            acc = np.matmul(xc[0], w.reshape(q * o, -1).T.astype(dt))          # exact integers in dt
            return _requantize_sets(qm, node, acc.reshape(bsz, q, o), b, bound, sets_axis=1)
        acc = exact_matmul_keep(xc, w.transpose(0, 2, 1), bound)   # (Q, B, O)
        return _requantize_sets(qm, node, acc, b[:, None, :], bound)
    a = node.attrs
    kh, kw = a["kernel"]
    stride, padding, groups = a["stride"], a["padding"], a["groups"]
    h, wd, c = x.shape[2:]
    ho = out_size(h, kh, stride[0], padding[0] + padding[1])
    wo = out_size(wd, kw, stride[1], padding[2] + padding[3])
    cig = w.shape[-1]
    if groups == c and cig == 1 and c > 1:   # NOTE: a 1-channel conv is faster as a GEMM (same integers)
        acc = ie.depthwise_acc_sets(x, zx, w, bound, stride, padding, (ho, wo))
        return _requantize_sets(qm, node, _pooled(acc, pool), b[:, None, None, None, :], bound)
    dt = gemm_dtype(bound)
    xc = x.reshape(qx * bsz, h, wd, c).astype(dt) - dt.type(zx)
    cols = im2col(xc, (kh, kw), stride, padding, 0)           # (Qx*M, kh*kw*C)
    m = bsz * ho * wo
    if qx == 1 and groups == 1:
        # one GEMM against all Q weight sets side by side: (M, K) @ (K, Q*O), channels q-major
        wk = w.reshape(q * o, kh * kw * cig).T.astype(dt)
        acc = np.matmul(cols, wk).reshape(bsz, ho, wo, q * o)  # exact integers in dt
        if pool is not None:
            acc = ie.maxpool_fwd_s8(acc, pool.attrs["kernel"], pool.attrs["stride"])
        hp, wp = acc.shape[1:3]
        return _requantize_sets(qm, node, acc.reshape(bsz, hp, wp, q, o), b, bound, sets_axis=3)
    opg = o // groups
    cols_g = cols.reshape(qx, m, kh * kw, groups, cig).transpose(0, 3, 1, 2, 4)
    cols_g = cols_g.reshape(qx, groups, m, kh * kw * cig)
    w_g = w.reshape(q, groups, opg, kh * kw * cig).transpose(0, 1, 3, 2)
    acc = exact_matmul_keep(cols_g, w_g, bound)   # (Q, G, M, Og)
    acc = acc.transpose(0, 2, 1, 3).reshape(q, bsz, ho, wo, o)
    return _requantize_sets(qm, node, _pooled(acc, pool), b[:, None, None, None, :], bound)


def _pooled(acc: np.ndarray, pool: Node | None) -> np.ndarray:
    """Accumulators (Q, B, H, W, O) through the fused maxpool (exact on any integer-valued dtype)."""
    if pool is None:
        return acc
    q, bsz = acc.shape[:2]
    acc = ie.maxpool_fwd_s8(acc.reshape(q * bsz, *acc.shape[2:]), pool.attrs["kernel"], pool.attrs["stride"])
    return acc.reshape(q, bsz, *acc.shape[1:])


def _requantize_sets(qm: QuantModel, node: Node, acc: np.ndarray, b: np.ndarray, bound: int,
                     sets_axis: int = 0) -> np.ndarray:
    """int8 outputs (Q, B, ...) of the Q weight sets' accumulators `acc` plus their biases `b`.

    `acc` holds exact integers (float32/float64 from an exact GEMM, or int64), laid out with the
    weight sets on `sets_axis` (a GEMM against the sets side by side leaves them next to the
    channels); `b` broadcasts against `acc`. Every partial sum is at most `bound` (`_l1_bound`),
    so `requantize_products` runs the exact float64 form where its bound allows. The sets move
    to the front on the int8 result (an eighth of an int64 transpose).
    """
    mult, shift = qm.requant_params(node)
    lo, hi = qm.act_range(node)
    y = requantize_products(acc, b, bound, mult, shift, qm.zero_point(node.name), lo, hi, qm.rounding)
    if sets_axis:
        y = np.ascontiguousarray(np.moveaxis(y, sets_axis, 0))
    return y


@dataclass(frozen=True)
class WeightSets:
    """A producer of Q weight sets of one conv2d/linear node (WP queries): ``param_fwd_multi``.

    Unlike a plain callable it can take the fused maxpool that follows the
    node (`fusable_pool`), so the query pass requantizes the pooled tensor.
    """

    qm: QuantModel
    node: Node
    w: np.ndarray              # (Q, *W) int8
    b: np.ndarray              # (Q, O) int32
    bounds: ChannelBounds | None = None   # optional upper bounds over the sets (`_l1_bound`)

    def __call__(self, x: np.ndarray, pool: Node | None = None) -> np.ndarray:
        return param_fwd_multi(self.qm, self.node, x, self.w, self.b, pool, self.bounds)


def fusable_pool(qm: QuantModel, node: Node) -> Node | None:
    """The maxpool that alone reads conv2d `node`'s output (then the two fuse), else None."""
    if node.op != Op.CONV2D or node.name == qm.graph.output:
        return None
    if qm.rounding == "tflite" and int(qm.requant_params(node)[1].max()) > 0:
        # NOTE: the fusion needs a requantization monotone in acc; TFLite's rule is, except that its
        # left shift (shift > 0) wraps in int32 for |acc * M| >= 2^30, so such layers do not fuse.
        return None
    users = qm.graph.consumers(node.name)
    if len(users) == 1 and users[0].op == Op.MAXPOOL:
        return users[0]
    return None


def affected_nodes(qm: QuantModel, perturbed: set[str]) -> list[Node]:
    """Nodes whose output changes when `perturbed` nodes change: the part a query re-runs."""
    hit: set[str] = set()
    out = []
    for n in qm.graph.nodes:
        if n.name in perturbed or any(s in hit for s in n.inputs):
            hit.add(n.name)
            out.append(n)
    return out


def run_queries(qm: QuantModel, base: dict[str, np.ndarray], q: int,
                producers: dict[str, Producer]) -> np.ndarray:
    """Logits (Q*B, K) of Q perturbed passes that re-run only the affected nodes.

    `base` holds every tensor of the unperturbed pass; `producers` maps each
    perturbed node to the function computing its stacked output from its
    input (Qx, B, ...). Unaffected tensors read by affected nodes are the
    cached base tensors, repeated Q times only where a kernel needs them stacked.
    """
    bsz = len(base["input"])
    stacked: dict[str, np.ndarray] = {}

    def stacked_input(name: str) -> np.ndarray:
        if name in stacked:
            return stacked[name]
        t = base[name]
        return np.broadcast_to(t[None], (q, *t.shape)).reshape(q * bsz, *t.shape[1:])

    fused: set[str] = set()
    for n in affected_nodes(qm, set(producers)):
        if n.name in fused:
            continue
        pool = fusable_pool(qm, n)
        name = n.name if pool is None else pool.name
        if pool is not None:
            fused.add(pool.name)
        if n.name in producers:
            src = n.inputs[0]
            x = stacked[src].reshape(q, bsz, *stacked[src].shape[1:]) if src in stacked else base[src][None]
            prod = producers[n.name]
            y = prod(x, pool) if isinstance(prod, WeightSets) else prod(x)
            if isinstance(prod, WeightSets) or pool is None:
                stacked[name] = y.reshape(q * bsz, *y.shape[2:])
            else:                     # a producer of a finished output: pool it as the engine does
                stacked[n.name] = y.reshape(q * bsz, *y.shape[2:])
                stacked[name] = ie.run_node(qm, pool, [stacked[n.name]])
        elif pool is not None:
            x = stacked_input(n.inputs[0])
            y = param_fwd_multi(qm, n, x.reshape(1, *x.shape), qm.weights[n.name][None],
                                qm.biases[n.name][None], pool)
            stacked[name] = y[0]
        else:
            stacked[n.name] = node_fwd(qm, n, [stacked_input(s) for s in n.inputs])
    out = qm.graph.output
    if out not in stacked:
        raise ValueError(f"perturbed nodes {sorted(producers)} do not reach the logits '{out}'")
    return stacked[out].reshape(q * bsz, -1)


def tail_elements(qm: QuantModel, perturbed: set[str]) -> int:
    """Per-sample elements of every tensor a query pass creates (sizes the query chunks)."""
    return sum(int(np.prod(qm.graph.shape(n.name))) for n in affected_nodes(qm, perturbed))


def tail_macs(qm: QuantModel, perturbed: set[str]) -> int:
    """Per-sample MACs of one partial forward pass that re-runs from `perturbed`."""
    return sum(qm.graph.macs(n) for n in affected_nodes(qm, perturbed))
