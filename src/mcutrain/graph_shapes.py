"""The shape rules: one node's output shape from its inputs, and every attribute and parameter checked.

A graph is validated once, when it is built (`graph.Graph`); these rules are where a file's
numbers are held to the limits (`mcutrain.limits`), so a message names the node and the field
before anything is allocated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mcutrain.graph_ops import (
    ACT_NAMES,
    ACTIVATIONS,
    FUSES_ACTIVATION,
    LOSS,
    GraphError,
    Node,
    Op,
)
from mcutrain.limits import MAX_DIM, MAX_MACS, MAX_PARAMS, MAX_TENSOR_ELEMENTS


def _out_len(size: int, k: int, s: int, pad: int) -> int:
    return (size + pad - k) // s + 1


PARAM_NAMES = {Op.CONV2D: ("bias", "weight"), Op.LINEAR: ("bias", "weight"),
               Op.BATCHNORM: ("beta", "gamma", "mean", "var")}
"""The parameters each op has (sorted); every other op has none."""


def is_whole_number(v: Any) -> bool:
    """An int (Python or numpy) that is not a bool: what counts, strides and sizes must be."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _attr_ints(where: str, a: dict[str, Any], key: str, n: int, lo: int) -> tuple[int, ...]:
    """Attribute `key` as `n` whole numbers in [lo, MAX_DIM] (an int counts for all n)."""
    v = a.get(key)
    vals = (v,) * n if is_whole_number(v) else tuple(v) if isinstance(v, (tuple, list)) else None
    if vals is None or len(vals) != n or not all(is_whole_number(x) and lo <= x <= MAX_DIM for x in vals):
        what = "a whole number" if n == 1 else f"{n} whole numbers"
        raise GraphError(f"{where}: {key} must be {what} in {lo}..{MAX_DIM}, got {v!r}")
    return tuple(int(x) for x in vals)


def _check_params(node: Node, where: str) -> None:
    """The op's parameters exist, are float arrays of bounded size and hold finite values."""
    want = PARAM_NAMES.get(node.op, ())
    if tuple(sorted(node.params)) != want:
        raise GraphError(f"{where}: parameters must be {list(want)}, got {sorted(node.params)}")
    for k, p in node.params.items():
        if not isinstance(p, np.ndarray) or p.dtype.kind != "f":
            kind = p.dtype if isinstance(p, np.ndarray) else type(p).__name__
            raise GraphError(f"{where}: parameter '{k}' must be a float array, got {kind}")
        if p.size > MAX_PARAMS:
            raise GraphError(f"{where}: parameter '{k}' has {p.size:,} values, more than the limit "
                             f"{MAX_PARAMS:,}")
        if not np.isfinite(p).all():
            raise GraphError(f"{where}: parameter '{k}' holds {int(np.sum(~np.isfinite(p)))} NaN or "
                             "infinite values; the model is broken: re-create or re-train it")


def _check_size(where: str, what: str, shape: tuple[int, ...]) -> None:
    n = int(np.prod(shape, dtype=np.float64))
    if n > MAX_TENSOR_ELEMENTS:
        raise GraphError(f"{where}: {what} {shape} has {n:,} elements per sample, more than the limit "
                         f"{MAX_TENSOR_ELEMENTS:,} (mcutrain.limits); use a smaller input")


def infer_shape(node: Node, ins: list[tuple[int, ...]]) -> tuple[int, ...]:
    """Output shape of one node from its input shapes; GraphError on mismatch.

    Every attribute is checked (whole numbers, in range), every parameter is a finite float
    array, and no tensor exceeds `limits.MAX_TENSOR_ELEMENTS`: a model file is outside input.
    """
    out = _shape_of(node, ins)
    _check_size(f"node '{node.name}' ({node.op.value})", "output", out)
    return out


def _shape_of(node: Node, ins: list[tuple[int, ...]]) -> tuple[int, ...]:
    op, a = node.op, node.attrs
    where = f"node '{node.name}' ({op.value})"
    n_in = 2 if op == Op.ADD else 1
    if len(ins) != n_in:
        raise GraphError(f"{where}: takes {n_in} input(s), got {len(ins)}")
    for s in ins:
        _check_size(where, "input", s)
    _check_params(node, where)
    x = ins[0]
    if op in FUSES_ACTIVATION and a.get("act", "none") not in ACT_NAMES:
        raise GraphError(f"{where}: act must be one of {ACT_NAMES}, got {a.get('act')!r}")
    if op in (Op.CONV2D, Op.MAXPOOL, Op.AVGPOOL, Op.GLOBAL_AVGPOOL, Op.BATCHNORM) and len(x) != 3 \
            and not (op == Op.BATCHNORM and len(x) == 1):
        raise GraphError(f"{where}: needs an (H, W, C) input, got shape {x}")
    if op == Op.CONV2D:
        h, w, c = x
        kh, kw = _attr_ints(where, a, "kernel", 2, 1)
        sh, sw = _attr_ints(where, a, "stride", 2, 1)
        pt, pb, pl, pr = _attr_ints(where, a, "padding", 4, 0)
        (g,), (o,) = _attr_ints(where, a, "groups", 1, 1), _attr_ints(where, a, "out_channels", 1, 1)
        wt = node.params["weight"]
        if c % g or o % g:
            raise GraphError(f"{where}: channels in {c} / out {o} not divisible by groups {g}")
        if wt.shape != (o, kh, kw, c // g):
            raise GraphError(f"{where}: weight shape {wt.shape} != expected OHWI {(o, kh, kw, c // g)} "
                             f"for input {x}")
        if node.params["bias"].shape != (o,):
            raise GraphError(f"{where}: bias shape {node.params['bias'].shape} != ({o},)")
        if min(sh, sw) < 1 or min(pt, pb, pl, pr) < 0:
            raise GraphError(f"{where}: stride must be >= 1 and padding >= 0")
        ho, wo = _out_len(h, kh, sh, pt + pb), _out_len(w, kw, sw, pl + pr)
        if ho < 1 or wo < 1:
            raise GraphError(f"{where}: kernel {kh}x{kw} does not fit input {h}x{w} with padding")
        if ho * wo * o * kh * kw * (c // g) > MAX_MACS:
            raise GraphError(f"{where}: more than {MAX_MACS:,} multiply-accumulates per sample")
        return ho, wo, o
    if op == Op.LINEAR:
        if len(x) != 1:
            raise GraphError(f"{where}: needs a flat (F,) input, got shape {x}; insert a flatten")
        (o,) = _attr_ints(where, a, "out_features", 1, 1)
        if node.params["weight"].shape != (o, x[0]):
            raise GraphError(f"{where}: weight shape {node.params['weight'].shape} != expected {(o, x[0])}")
        if node.params["bias"].shape != (o,):
            raise GraphError(f"{where}: bias shape {node.params['bias'].shape} != ({o},)")
        return (o,)
    if op in (Op.MAXPOOL, Op.AVGPOOL):
        h, w, c = x
        kh, kw = _attr_ints(where, a, "kernel", 2, 1)
        sh, sw = _attr_ints(where, a, "stride", 2, 1)
        ho, wo = _out_len(h, kh, sh, 0), _out_len(w, kw, sw, 0)
        if ho < 1 or wo < 1:
            raise GraphError(f"{where}: window {kh}x{kw} does not fit input {h}x{w}")
        return ho, wo, c
    if op == Op.GLOBAL_AVGPOOL:
        return 1, 1, x[2]
    if op == Op.FLATTEN:
        return (int(np.prod(x)),)
    if op == Op.ADD:
        if ins[0] != ins[1]:
            raise GraphError(f"{where}: input shapes differ: {ins[0]} vs {ins[1]}")
        return x
    if op in ACTIVATIONS:
        return x
    if op == Op.BATCHNORM:
        c = x[-1]
        for k in ("gamma", "beta", "mean", "var"):
            if node.params[k].shape != (c,):
                raise GraphError(f"{where}: {k} shape {node.params[k].shape} != ({c},)")
        eps = a.get("eps", 0.0)
        if not isinstance(eps, (float, int, np.floating, np.integer)) or isinstance(eps, bool) \
                or not np.isfinite(eps) or eps < 0:
            raise GraphError(f"{where}: eps must be a finite number >= 0, got {eps!r}")
        var = node.params["var"].astype(np.float64)
        if np.any(var < 0) or np.any(var + float(eps) <= 0):
            raise GraphError(f"{where}: variance must be >= 0 with var + eps > 0 (got minimum "
                             f"{var.min():g}, eps {eps:g}); the statistics are broken: re-export them")
        return x
    if op in LOSS:
        raise GraphError(f"{where}: a model graph ends at its logits; the loss is added by the method")
    raise GraphError(f"{where}: unknown op")  # pragma: no cover - Op is closed
