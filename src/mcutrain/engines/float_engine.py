"""The float32 engine: forward and backward of every op of the model IR.

This is the float reference every method is measured against (pretraining,
the float upper bound, the `float32` precision of FQT). It is one rule
table, `RULES`: per op a forward and, right below it, its backward, which
returns one gradient per input (None where an input needs none) and the
parameter gradients. Fused activations (`act` of conv2d/linear/add) are
applied after the op's forward and undone before its backward, by the same
two functions that implement the standalone relu/relu6 ops.

Layouts follow the IR: NHWC activations with a leading batch dimension, OHWI
conv weights, (O, I) linear weights. Convolutions are im2col + one BLAS GEMM
(grouped ones a batched GEMM); depthwise convolutions are a sum over kernel
taps of strided views, since a block-diagonal GEMM would multiply mostly
zeros. Nothing loops in Python over pixels or samples.

`run` keeps the im2col columns in `Activations.saved`, so a training step
builds each im2col matrix once.

Example:
    >>> from mcutrain import zoo
    >>> g = zoo.build("digits-cnn")
    >>> x = np.zeros((4, 8, 8, 1), np.float32)
    >>> acts = run(g, x)
    >>> loss, d_logits = softmax_cross_entropy(acts[g.output], np.array([0, 1, 2, 3]))
    >>> grads, d_input = backward(g, acts, d_logits)
    >>> grads["fc"]["weight"].shape, d_input.shape
    ((10, 512), (4, 8, 8, 1))
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from mcutrain.engines.im2col import col2im, im2col, out_size, pad_nhwc, tap_views
from mcutrain.graph import FUSES_ACTIVATION, INPUT, Graph, Node, Op

Grads = dict[str, dict[str, np.ndarray]]


class Activations(dict):
    """Every tensor of a forward pass by name (including 'input').

    `saved[node_name]` holds values the node's backward reuses (im2col
    columns); it is empty when `run(..., save=False)`.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.saved: dict[str, dict[str, np.ndarray]] = {}
        self.dtype: type = np.float32


@dataclass
class Ctx:
    """What one backward rule sees."""

    node: Node
    xs: list[np.ndarray]          # the node's inputs, as in the forward pass
    y: np.ndarray                 # its output (after any fused activation)
    gy: np.ndarray                # d loss / d output, already through the fused activation
    saved: dict[str, np.ndarray]  # what its forward kept
    need_x: list[bool]            # which inputs need a gradient
    need_params: bool             # whether parameter gradients are wanted
    dtype: type

    def param(self, key: str) -> np.ndarray:
        return self.node.params[key].astype(self.dtype, copy=False)


BackwardResult = tuple[list[np.ndarray | None], dict[str, np.ndarray]]


@dataclass(frozen=True)
class Rule:
    forward: Callable[[Node, list[np.ndarray], dict[str, np.ndarray], type], np.ndarray]
    backward: Callable[[Ctx], BackwardResult]


# ---------------------------------------------------------------- activations


def act_forward(act: str, z: np.ndarray) -> np.ndarray:
    """Apply `act` in place on a fresh pre-activation `z` and return it."""
    if act == "relu":
        np.maximum(z, 0, out=z)
    elif act == "relu6":
        np.clip(z, 0, 6, out=z)
    return z


def act_backward(act: str, y: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """Gradient through `act` from its output: open interval (0, 6) for relu6, like torch.

    Reading the mask off the output is exact: y > 0 iff z > 0, and y < 6 iff z < 6.
    """
    if act == "relu":
        return gy * (y > 0)
    if act == "relu6":
        return gy * ((y > 0) & (y < 6))
    return gy


def _relu_fwd(node, xs, saved, dtype):
    return act_forward("relu", xs[0].copy())


def _relu_bwd(c: Ctx) -> BackwardResult:
    return [act_backward("relu", c.y, c.gy)], {}


def _relu6_fwd(node, xs, saved, dtype):
    return act_forward("relu6", xs[0].copy())


def _relu6_bwd(c: Ctx) -> BackwardResult:
    return [act_backward("relu6", c.y, c.gy)], {}


def _sum_rows(g: np.ndarray) -> np.ndarray:
    """Column sums of a (rows, cols) gradient: the bias gradient.

    NOTE: a GEMV with a ones vector; numpy's sum over axis 0 of a tall, narrow
    float32 matrix is several times slower (1.8 ms vs 0.3 ms for 50176 x 16).
    """
    return np.ones(g.shape[0], g.dtype) @ g


# ---------------------------------------------------------------- conv2d


def _conv_geometry(node: Node, x: np.ndarray) -> tuple[int, int, int]:
    a = node.attrs
    ho = out_size(x.shape[1], a["kernel"][0], a["stride"][0], a["padding"][0] + a["padding"][1])
    wo = out_size(x.shape[2], a["kernel"][1], a["stride"][1], a["padding"][2] + a["padding"][3])
    return ho, wo, a["out_channels"]


def _conv_fwd(node, xs, saved, dtype):
    x, a = xs[0], node.attrs
    w, b = node.params["weight"].astype(dtype, copy=False), node.params["bias"].astype(dtype, copy=False)
    n, (ho, wo, o) = x.shape[0], _conv_geometry(node, x)
    groups, cig = a["groups"], w.shape[3]
    if groups > 1 and cig == 1:
        return _depthwise_fwd(node, x, w, b)
    cols = im2col(x, a["kernel"], a["stride"], a["padding"])
    if saved is not None:
        saved["cols"] = cols
    if groups == 1:
        z = cols @ w.reshape(o, -1).T
    else:
        gcols, gw = _group_split(cols, w, groups)
        z = np.matmul(gcols, gw.transpose(0, 2, 1))              # (G, N*P, O/G)
        z = z.transpose(1, 0, 2).reshape(-1, o)
    z += b
    return z.reshape(n, ho, wo, o)


def _conv_bwd(c: Ctx) -> BackwardResult:
    x, a = c.xs[0], c.node.attrs
    w = c.param("weight")
    groups, cig = a["groups"], w.shape[3]
    if groups > 1 and cig == 1:
        return _depthwise_bwd(c, w)
    o = w.shape[0]
    g = c.gy.reshape(-1, o)
    cols = c.saved.get("cols")
    if cols is None:
        cols = im2col(x, a["kernel"], a["stride"], a["padding"])
    grads: dict[str, np.ndarray] = {}
    if groups == 1:
        if c.need_params:
            grads = {"weight": (g.T @ cols).reshape(w.shape), "bias": _sum_rows(g)}
        return [_conv_input_grad(c.gy, w, x.shape, a["stride"], a["padding"]) if c.need_x[0] else None], \
            grads
    gcols, gw = _group_split(cols, w, groups)
    gg = g.reshape(-1, groups, o // groups).transpose(1, 0, 2)      # (G, N*P, O/G)
    if c.need_params:
        grads = {"weight": np.matmul(gg.transpose(0, 2, 1), gcols).reshape(w.shape), "bias": _sum_rows(g)}
    dx = None
    if c.need_x[0]:
        kk = a["kernel"][0] * a["kernel"][1]
        dg = np.matmul(gg, gw)                                       # (G, N*P, kh*kw*cig)
        dcols = dg.reshape(groups, -1, kk, cig).transpose(1, 2, 0, 3).reshape(cols.shape)
        dx = col2im(dcols, x.shape, a["kernel"], a["stride"], a["padding"])
    return [dx], grads


def _conv_input_grad(gy: np.ndarray, w: np.ndarray, x_shape: tuple[int, ...],
                     stride: tuple[int, int], padding: tuple[int, int, int, int]) -> np.ndarray:
    """d loss / d input of a groups=1 conv: per kernel tap one GEMM, added into a strided view.

    Equal to col2im(gy @ W) but never builds the (N*P, kh*kw*C) matrix and adds
    contiguous blocks: about twice as fast as col2im on small-cnn's conv2.
    """
    n, h, wd, cin = x_shape
    o, kh, kw, _ = w.shape
    _, ho, wo, _ = gy.shape
    g = gy.reshape(-1, o)
    if (kh, kw) == (1, 1) and stride == (1, 1) and not any(padding):
        return (g @ w.reshape(o, cin)).reshape(x_shape)
    pt, pb, pl, pr = padding
    dxp = np.zeros((n, h + pt + pb, wd + pl + pr, cin), gy.dtype)
    tap = np.empty((g.shape[0], cin), gy.dtype)                # one GEMM result buffer for all taps
    for i, j, view in tap_views(dxp, (kh, kw), stride, (ho, wo)):
        np.matmul(g, w[:, i, j, :], out=tap)
        view += tap.reshape(n, ho, wo, cin)
    return dxp[:, pt:pt + h, pl:pl + wd, :]


def _group_split(cols: np.ndarray, w: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns (N*P, kh*kw*C) -> (G, N*P, kh*kw*C/G) and OHWI weights -> (G, O/G, kh*kw*C/G)."""
    o, kh, kw, cig = w.shape
    gcols = cols.reshape(cols.shape[0], kh * kw, groups, cig).transpose(2, 0, 1, 3)
    gcols = gcols.reshape(groups, cols.shape[0], kh * kw * cig)
    return gcols, w.reshape(groups, o // groups, kh * kw * cig)


def _depthwise_fwd(node: Node, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """groups == C_in: y[..., o] = sum over taps of x[..., o // m] * w[o, i, j, 0], m = O / C_in."""
    a = node.attrs
    ho, wo, o = _conv_geometry(node, x)
    m = o // x.shape[3]
    xr = np.repeat(x, m, axis=3) if m > 1 else x
    xp = pad_nhwc(xr, a["padding"])
    y = np.empty((x.shape[0], ho, wo, o), x.dtype)
    y[:] = b
    tmp = np.empty_like(y)
    for i, j, view in tap_views(xp, a["kernel"], a["stride"], (ho, wo)):
        np.multiply(view, w[:, i, j, 0], out=tmp)
        y += tmp
    return y


def _depthwise_bwd(c: Ctx, w: np.ndarray) -> BackwardResult:
    x, a, gy = c.xs[0], c.node.attrs, c.gy
    n, h, wd, cin = x.shape
    ho, wo, o = gy.shape[1:]
    m = o // cin
    grads: dict[str, np.ndarray] = {}
    if c.need_params:
        xp = pad_nhwc(np.repeat(x, m, axis=3) if m > 1 else x, a["padding"])
        dw = np.empty_like(w)
        for i, j, view in tap_views(xp, a["kernel"], a["stride"], (ho, wo)):
            dw[:, i, j, 0] = np.einsum("nhwc,nhwc->c", view, gy)
        grads = {"weight": dw, "bias": _sum_rows(gy.reshape(-1, o))}
    dx = None
    if c.need_x[0]:
        pt, pb, pl, pr = a["padding"]
        dxp = np.zeros((n, h + pt + pb, wd + pl + pr, o), gy.dtype)
        tmp = np.empty_like(gy)
        for i, j, view in tap_views(dxp, a["kernel"], a["stride"], (ho, wo)):
            np.multiply(gy, w[:, i, j, 0], out=tmp)
            view += tmp
        dx = dxp[:, pt:pt + h, pl:pl + wd, :]
        if m > 1:
            dx = dx.reshape(n, h, wd, cin, m).sum(-1)
    return [dx], grads


# ---------------------------------------------------------------- linear


def _linear_fwd(node, xs, saved, dtype):
    w, b = node.params["weight"].astype(dtype, copy=False), node.params["bias"].astype(dtype, copy=False)
    z = xs[0] @ w.T
    z += b
    return z


def _linear_bwd(c: Ctx) -> BackwardResult:
    grads = {"weight": c.gy.T @ c.xs[0], "bias": _sum_rows(c.gy)} if c.need_params else {}
    return [c.gy @ c.param("weight") if c.need_x[0] else None], grads


# ---------------------------------------------------------------- pooling


def _pool_views(node: Node, x: np.ndarray):
    a = node.attrs
    ho = out_size(x.shape[1], a["kernel"][0], a["stride"][0], 0)
    wo = out_size(x.shape[2], a["kernel"][1], a["stride"][1], 0)
    return tap_views(x, a["kernel"], a["stride"], (ho, wo))


def _maxpool_fwd(node, xs, saved, dtype):
    """Window max, as a running np.maximum over the kernel taps."""
    views = [view for _, _, view in _pool_views(node, xs[0])]
    y = views[0].copy()
    for view in views[1:]:
        np.maximum(y, view, out=y)
    return y


def _maxpool_bwd(c: Ctx) -> BackwardResult:
    """All of a window's gradient goes to its first maximal tap in (i, j) order, as torch does.

    The argmax is recomputed here rather than tracked in the forward pass:
    a running argmax needs masked copies and costs about 20x the max itself.
    """
    (kh, kw), (sh, sw) = c.node.attrs["kernel"], c.node.attrs["stride"]
    disjoint = sh >= kh and sw >= kw          # windows do not overlap: each dx element has one writer
    dx = np.zeros_like(c.xs[0])
    taken = np.zeros(c.y.shape, bool)
    hit = np.empty(c.y.shape, bool)
    taps = list(zip(_pool_views(c.node, c.xs[0]), _pool_views(c.node, dx)))
    for t, ((_, _, xv), (_, _, dv)) in enumerate(taps):
        np.equal(xv, c.y, out=hit)
        np.greater(hit, taken, out=hit)       # hit and not yet taken by an earlier tap
        if t + 1 < len(taps):
            taken |= hit
        if disjoint:
            np.multiply(c.gy, hit, out=dv)
        else:
            dv += c.gy * hit
    return [dx], {}


def _avgpool_fwd(node, xs, saved, dtype):
    views = [view for _, _, view in _pool_views(node, xs[0])]
    y = views[0].copy()
    for view in views[1:]:
        y += view
    kh, kw = node.attrs["kernel"]
    y *= np.asarray(1.0 / (kh * kw), y.dtype)
    return y


def _avgpool_bwd(c: Ctx) -> BackwardResult:
    kh, kw = c.node.attrs["kernel"]
    share = c.gy * np.asarray(1.0 / (kh * kw), c.gy.dtype)
    dx = np.zeros_like(c.xs[0])
    for _, _, view in _pool_views(c.node, dx):
        view += share
    return [dx], {}


def _gap_fwd(node, xs, saved, dtype):
    return xs[0].mean(axis=(1, 2), keepdims=True, dtype=xs[0].dtype)


def _gap_bwd(c: Ctx) -> BackwardResult:
    n, h, w, ch = c.xs[0].shape
    share = c.gy * np.asarray(1.0 / (h * w), c.gy.dtype)
    return [np.broadcast_to(share, (n, h, w, ch)).copy()], {}


# ---------------------------------------------------------------- shape and add


def _flatten_fwd(node, xs, saved, dtype):
    return xs[0].reshape(xs[0].shape[0], -1)


def _flatten_bwd(c: Ctx) -> BackwardResult:
    return [c.gy.reshape(c.xs[0].shape)], {}


def _add_fwd(node, xs, saved, dtype):
    return xs[0] + xs[1]


def _add_bwd(c: Ctx) -> BackwardResult:
    return [c.gy if c.need_x[0] else None, c.gy if c.need_x[1] else None], {}


RULES: dict[Op, Rule] = {
    Op.CONV2D: Rule(_conv_fwd, _conv_bwd),
    Op.LINEAR: Rule(_linear_fwd, _linear_bwd),
    Op.RELU: Rule(_relu_fwd, _relu_bwd),
    Op.RELU6: Rule(_relu6_fwd, _relu6_bwd),
    Op.MAXPOOL: Rule(_maxpool_fwd, _maxpool_bwd),
    Op.AVGPOOL: Rule(_avgpool_fwd, _avgpool_bwd),
    Op.GLOBAL_AVGPOOL: Rule(_gap_fwd, _gap_bwd),
    Op.FLATTEN: Rule(_flatten_fwd, _flatten_bwd),
    Op.ADD: Rule(_add_fwd, _add_bwd),
}
"""One forward and one backward per op. BatchNorm is folded at import; the loss is below.

Backward rules return new gradient arrays (or their input gradient `gy` itself
where the op is the identity for it); they never add into a buffer. `backward`
sums the gradients of a tensor that several nodes read.
"""


# ---------------------------------------------------------------- graph passes


def _rule(node: Node) -> Rule:
    rule = RULES.get(node.op)
    if rule is None:
        hint = " (fold it with graph_passes.fold_batchnorm first)" if node.op == Op.BATCHNORM else ""
        raise ValueError(f"node '{node.name}': the float engine has no rule for op "
                         f"'{node.op.value}'{hint}")
    return rule


def run(graph: Graph, x: np.ndarray, save: bool = True, dtype: type = np.float32) -> Activations:
    """Forward pass over a batch `x` (B, *input_shape); every tensor by name, incl. 'input'.

    With `save`, values the backward pass reuses are kept in `.saved`.
    `dtype` is float32 for all real work; tests use float64 for finite differences.
    """
    x = np.asarray(x)
    if x.shape[1:] != graph.input_shape:
        raise ValueError(f"input batch has per-sample shape {x.shape[1:]}, but graph '{graph.name}' "
                         f"expects {graph.input_shape} (NHWC, batch first)")
    acts = Activations({INPUT: x.astype(dtype, copy=False)})
    acts.dtype = dtype
    for node in graph.nodes:
        saved = acts.saved.setdefault(node.name, {}) if save else None
        y = _rule(node).forward(node, [acts[s] for s in node.inputs], saved, dtype)
        if node.op in FUSES_ACTIVATION:
            y = act_forward(node.act, y)
        acts[node.name] = y
    return acts


def forward(graph: Graph, x: np.ndarray) -> np.ndarray:
    """Logits (B, K) of a batch: inference only, nothing kept for backward."""
    acts = run(graph, x, save=False)
    return acts[graph.output].reshape(len(acts[INPUT]), -1)


def backward(graph: Graph, acts: Activations, grad_out: np.ndarray,
             trainable: Collection[str] | None = None,
             input_grad: bool = True) -> tuple[Grads, np.ndarray | None]:
    """Back-propagate `grad_out` (d loss / d graph output) through the pass recorded in `acts`.

    Returns (parameter gradients per node name -> {"weight", "bias"}, d loss /
    d input). `trainable` limits parameter gradients to those nodes (default:
    every conv2d/linear); gradients flow only as far back as some trainable
    node (or, with `input_grad`, the input) needs them, so a frozen front of
    the network costs nothing. Without `input_grad` the second value is None.
    """
    names = {n.name for n in graph.parametric()} if trainable is None else set(trainable)
    unknown = names - {n.name for n in graph.parametric()}
    if unknown:
        raise ValueError(f"trainable names {sorted(unknown)} are not conv2d/linear nodes of "
                         f"graph '{graph.name}'")
    # needs[t]: does any gradient we want lie upstream of tensor t (t included)?
    needs = {INPUT: input_grad}
    for node in graph.nodes:
        needs[node.name] = node.name in names or any(needs[s] for s in node.inputs)
    out = acts[graph.output]
    gy = {graph.output: np.asarray(grad_out, acts.dtype).reshape(out.shape)}
    grads: Grads = {}
    for node in reversed(graph.nodes):
        g = gy.pop(node.name, None)
        if g is None or not needs[node.name]:
            continue
        if node.op in FUSES_ACTIVATION:
            g = act_backward(node.act, acts[node.name], g)
        ctx = Ctx(node, [acts[s] for s in node.inputs], acts[node.name], g,
                  acts.saved.get(node.name, {}), [needs[s] for s in node.inputs],
                  node.name in names, acts.dtype)
        dxs, pgrads = _rule(node).backward(ctx)
        if len(dxs) != len(node.inputs):  # pragma: no cover - guards the rule table
            raise AssertionError(f"backward rule of {node.op.value} returned {len(dxs)} "
                                 f"gradients for {len(node.inputs)} inputs")
        if ctx.need_params:
            grads[node.name] = pgrads
        for src, dx, need in zip(node.inputs, dxs, ctx.need_x):
            if need and dx is not None:
                gy[src] = gy[src] + dx if src in gy else dx
    return grads, (gy.get(INPUT) if input_grad else None)


# ---------------------------------------------------------------- loss


def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean softmax cross-entropy over the batch and its gradient d loss / d logits.

    The gradient is (softmax - one_hot) / B, in the dtype of `logits`.
    """
    logits = np.asarray(logits)
    labels = np.asarray(labels)
    if logits.ndim != 2 or labels.shape != (logits.shape[0],):
        raise ValueError(f"need logits (B, K) and labels (B,), got {logits.shape} and {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= logits.shape[1]):
        raise ValueError(f"labels must lie in [0, {logits.shape[1] - 1}], got range "
                         f"[{labels.min()}, {labels.max()}]")
    b = logits.shape[0]
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    rows = np.arange(b)
    loss = float(np.mean(np.log(s[:, 0]) - z[rows, labels]))
    grad = e / s
    grad[rows, labels] -= 1
    grad *= np.asarray(1.0 / b, grad.dtype)
    return loss, grad
