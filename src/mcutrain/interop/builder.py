"""What the PyTorch and ONNX importers share: NCHW source layers -> NHWC IR nodes.

Why a builder: both frameworks hold activations as (N, C, H, W) and flatten
them in C, H, W order, while the IR holds (H, W, C) and flattens in H, W, C
order. The activations need no transposes (each op is simply rewritten in
NHWC), but the vector a `flatten` of an (C, H, W) map produces is a
permutation of the source's, so the first linear layer after it must take
its input columns permuted. Every value therefore carries its layout
(`Value`): a feature map, a flat vector in the source's order, or a flat
vector whose CHW -> HWC permutation is still pending. The permutation is
applied once, to the weights of the linear layer that consumes it.

BatchNorm is emitted as the IR's import-only op and folded at `finish`, which
also fuses relu/relu6 into their producers, so an imported graph has the same
shape as a `zoo` graph.

Names: framework names ('/features/0/Conv', names with spaces, unicode, '*/' or
newlines, very long ones) are renamed deterministically into the IR's naming
rule (`graph.NAME_RULE`, `ir_name`), and the builder keeps `{new: original}` for
every renamed node that survives (`source_names`); `mcutrain import` stores it in
the model file's provenance so `--trainable layers:` accepts the original names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from mcutrain import graph as G
from mcutrain import graph_passes as P
from mcutrain.graph import INPUT, NAME_MAX, Graph, GraphError, Node, Op
from mcutrain.limits import MAX_DIM, MAX_PARAMS, MAX_TENSOR_ELEMENTS


class InteropError(ValueError):
    """A model that cannot be converted; the message names the layer and what to do."""


@dataclass(frozen=True)
class Value:
    """An IR tensor as the source framework sees it.

    `spatial`: a feature map, source (C, H, W) = IR (H, W, C). Otherwise flat;
    `pending` is then the (C, H, W) of the flatten that produced it when the
    IR's H, W, C order differs from the source's C, H, W order (H * W > 1).
    `nhwc`: a feature map the source has transposed to (H, W, C) — only a
    flatten may read it, and that flatten's order is the IR's own.
    """

    tensor: str
    spatial: bool
    pending: tuple[int, int, int] | None = None
    nhwc: bool = False


def f32(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def finite(where: str, what: str, a: np.ndarray) -> np.ndarray:
    """`a` as float32, refused (naming the layer) when it holds NaN or infinity or is absurdly large.

    Why at import: a NaN weight would be written into the model file silently and every
    later step (PTQ, training, the C export) would compute garbage from it.
    """
    if a.size > MAX_PARAMS:
        raise InteropError(f"{where}: {what} has {a.size:,} values, more than the limit {MAX_PARAMS:,}")
    with np.errstate(over="ignore", invalid="ignore"):
        out = f32(a)
    bad = int(np.sum(~np.isfinite(out)))
    if bad:
        raise InteropError(f"{where}: {what} holds {bad} NaN or infinite values (or values beyond "
                           "float32); fix or retrain the model before importing it")
    return out


def chw_to_hwc_columns(w: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """Linear weight (O, C*H*W) over a CHW-flattened input -> the same layer over an HWC-flattened one."""
    c, h, wd = chw
    return np.ascontiguousarray(w.reshape(w.shape[0], c, h, wd).transpose(0, 2, 3, 1).reshape(w.shape[0], -1))


def hwc_to_chw_columns(w: np.ndarray, hwc: tuple[int, int, int]) -> np.ndarray:
    """The inverse of `chw_to_hwc_columns`, given the IR shape (H, W, C) of the flattened map."""
    h, wd, c = hwc
    return np.ascontiguousarray(w.reshape(w.shape[0], h, wd, c).transpose(0, 3, 1, 2).reshape(w.shape[0], -1))


def same_padding(size: int, k: int, s: int, lower: bool = False) -> tuple[int, int]:
    """(begin, end) padding that makes the output ceil(size / s): the extra pixel goes at the end
    (PyTorch's padding='same', ONNX SAME_UPPER) or, with `lower`, at the beginning (SAME_LOWER)."""
    total = max((-(-size // s) - 1) * s + k - size, 0)
    small, big = total // 2, total - total // 2
    return (big, small) if lower else (small, big)


def pool_output_ok(size: int, k: int, s: int) -> bool:
    """ceil_mode gives the same output size as floor mode iff the windows tile the input exactly."""
    return size >= k and (size - k) % s == 0


def ir_name(name: str) -> str:
    """A framework name made to follow `graph.NAME_RULE`, deterministically.

    Leading '/' and surrounding spaces go, '/' separators become '.' (so
    '/features/0/Conv' -> 'features.0.Conv' and globs like 'features.*.Conv'
    work), runs of whitespace and every other character outside the rule become
    '_', a name that does not start with a letter or '_' gets 'n_' in front, and
    the result is cut to `NAME_MAX` characters.
    """
    s = re.sub(r"\s+", "_", str(name).strip().lstrip("/")).replace("/", ".")
    s = re.sub(r"[^A-Za-z0-9_.\-]", "_", s) or "node"
    if not re.match(r"[A-Za-z_]", s):
        s = "n_" + s
    return s[:NAME_MAX]


def _is_count(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


class GraphBuilder:
    """Collects IR nodes for one imported model; each method takes and returns `Value`s.

    `where` arguments describe the source layer ("module 'features.3' (Conv2d)")
    so every refusal names it.
    """

    def __init__(self, input_shape: tuple[int, ...], name: str):
        if len(input_shape) not in (1, 3) or min(input_shape) < 1 or max(input_shape) > MAX_DIM:
            raise InteropError(f"input shape {input_shape} must be (H, W, C) for images or (F,) for "
                               f"vectors, all sizes in 1..{MAX_DIM}")
        if int(np.prod(input_shape, dtype=np.float64)) > MAX_TENSOR_ELEMENTS:
            raise InteropError(f"input shape {input_shape} has more than {MAX_TENSOR_ELEMENTS:,} elements "
                               "per sample (mcutrain.limits); use a smaller input")
        self.input_shape = tuple(int(d) for d in input_shape)
        self.name = ir_name(name)
        self.nodes: list[Node] = []
        self._names = {INPUT}
        self._original: dict[str, str] = {}
        self.source_names: dict[str, str] = {}
        """{IR name: the framework's name} of the renamed nodes of the finished graph."""
        self._shapes: dict[str, tuple[int, ...]] = {INPUT: self.input_shape}

    # -- bookkeeping
    def input(self) -> Value:
        return Value(INPUT, spatial=len(self.input_shape) == 3)

    def unique(self, name: str) -> str:
        """A valid node name not used yet (`ir_name`, then '_1', '_2', ... within `NAME_MAX`);
        a name that changed is remembered with its original for `source_names`."""
        base = ir_name(name)
        out, i = base, 1
        while out in self._names:
            suffix = f"_{i}"
            out, i = base[:NAME_MAX - len(suffix)] + suffix, i + 1
        self._names.add(out)
        if out != name:
            self._original[out] = str(name)
        return out

    def shape(self, v: Value) -> tuple[int, ...]:
        """IR per-sample shape of a value (validating the nodes so far once per new node)."""
        if v.tensor not in self._shapes:
            try:
                self._shapes = dict(Graph(self.input_shape, self.nodes, self.name).shapes)
            except GraphError as e:
                raise InteropError(str(e)) from None
        return self._shapes[v.tensor]

    def _emit(self, node: Node) -> str:
        self.nodes.append(node)
        return node.name

    def _need_spatial(self, x: Value, where: str) -> None:
        if not x.spatial:
            raise InteropError(f"{where} needs a (C, H, W) feature map, but its input is flat")
        if x.nhwc:
            raise InteropError(f"{where} reads a feature map transposed to (H, W, C); only a "
                               "flatten may follow such a transpose")

    # -- ops
    def conv(self, name: str, x: Value, weight_oihw: np.ndarray, bias: np.ndarray | None,
             stride: tuple[int, int], padding: tuple[int, int, int, int], groups: int,
             where: str) -> Value:
        """Conv with OIHW weights and (top, bottom, left, right) padding."""
        self._need_spatial(x, where)
        w = finite(where, "the weight", np.asarray(weight_oihw))
        if w.ndim != 4:
            raise InteropError(f"{where}: only 2-D convolutions are supported (weight shape {w.shape}); "
                               "write a 1-D convolution as a 2-D one with kernel (1, k)")
        o = w.shape[0]
        b = finite(where, "the bias", np.asarray(bias)) if bias is not None else np.zeros(o, np.float32)
        if b.size != o:
            raise InteropError(f"{where}: bias has {b.size} values for {o} output channels")
        if not _is_count(groups) or groups < 1 or w.shape[1] * groups > MAX_DIM:
            raise InteropError(f"{where}: groups must be a whole number >= 1, got {groups!r}")
        node = G.conv2d(self.unique(name), x.tensor, o, w.shape[2:], stride=stride, padding=padding,
                        groups=groups, weight=np.ascontiguousarray(w.transpose(0, 2, 3, 1)),
                        bias=b.reshape(o))
        return Value(self._emit(node), True)

    def linear(self, name: str, x: Value, weight_oi: np.ndarray, bias: np.ndarray | None,
               where: str) -> Value:
        """Fully connected layer; a pending CHW -> HWC permutation is applied to its input columns."""
        if x.spatial:
            raise InteropError(f"{where} needs a flat input; insert a Flatten before it")
        w = finite(where, "the weight", np.asarray(weight_oi))
        if w.ndim != 2:
            raise InteropError(f"{where}: weight must be 2-D (out, in), got shape {w.shape}")
        if x.pending is not None:
            c, h, wd = x.pending
            if w.shape[1] != c * h * wd:
                raise InteropError(f"{where}: takes {w.shape[1]} inputs, but the flattened map has "
                                   f"{c}x{h}x{wd} = {c * h * wd}")
            w = chw_to_hwc_columns(w, x.pending)
        o = w.shape[0]
        b = finite(where, "the bias", np.asarray(bias)).reshape(-1) if bias is not None else \
            np.zeros(o, np.float32)
        if b.size == 1:
            b = np.full(o, b[0], np.float32)
        if b.shape != (o,):
            raise InteropError(f"{where}: bias has {b.size} values for {o} outputs")
        return Value(self._emit(G.linear(self.unique(name), x.tensor, o, weight=w, bias=b)), False)

    def batchnorm(self, name: str, x: Value, gamma, beta, mean, var, eps: float, where: str) -> Value:
        if x.pending is not None:
            raise InteropError(f"{where}: a BatchNorm on a flattened feature map is not supported; "
                               "put it before the Flatten (BatchNorm2d)")
        stats = {k: finite(where, k, np.asarray(v)).reshape(-1)
                 for k, v in (("gamma", gamma), ("beta", beta), ("mean", mean), ("var", var))}
        if not np.isfinite(eps) or eps < 0:
            raise InteropError(f"{where}: epsilon must be a finite number >= 0, got {eps}")
        v = stats["var"].astype(np.float64)
        if np.any(v < 0) or np.any(v + eps <= 0):
            raise InteropError(f"{where}: running variance must be >= 0 with var + eps > 0 (minimum "
                               f"{v.min():g}, eps {eps:g}); the statistics are broken: recompute them")
        node = G.batchnorm(self.unique(name), x.tensor, stats["gamma"], stats["beta"], stats["mean"],
                           stats["var"], eps)
        return Value(self._emit(node), x.spatial, None)

    def activation(self, name: str, x: Value, act: str) -> Value:
        make = G.relu if act == "relu" else G.relu6
        return Value(self._emit(make(self.unique(name), x.tensor)), x.spatial, x.pending, x.nhwc)

    def pool(self, kind: str, name: str, x: Value, kernel: tuple[int, int], stride: tuple[int, int],
             where: str, ceil_mode: bool = False) -> Value:
        """maxpool / avgpool without padding; ceil_mode only where it changes nothing."""
        self._need_spatial(x, where)
        h, w, _ = self.shape(x)
        if ceil_mode and not (pool_output_ok(h, kernel[0], stride[0])
                              and pool_output_ok(w, kernel[1], stride[1])):
            raise InteropError(f"{where}: ceil_mode=True adds a partial window on a {h}x{w} input "
                               f"(kernel {kernel}, stride {stride}); the IR has no partial windows. "
                               "Use ceil_mode=False or an input size the windows tile exactly")
        make = G.maxpool if kind == "max" else G.avgpool
        return Value(self._emit(make(self.unique(name), x.tensor, kernel, stride)), True)

    def adaptive_avgpool(self, name: str, x: Value, out_hw: tuple[int | None, int | None],
                         where: str) -> Value:
        """Output 1x1 is a global average pool; an output that divides the input is a plain avgpool."""
        self._need_spatial(x, where)
        h, w, _ = self.shape(x)
        oh, ow = (h if out_hw[0] is None else out_hw[0]), (w if out_hw[1] is None else out_hw[1])
        if (oh, ow) == (1, 1):
            return Value(self._emit(G.global_avgpool(self.unique(name), x.tensor)), True)
        if oh < 1 or ow < 1 or h % oh or w % ow:
            raise InteropError(f"{where}: adaptive average pooling of {h}x{w} to {oh}x{ow} has unequal "
                               "windows; only output 1x1 or sizes that divide the input are supported")
        if (oh, ow) == (h, w):
            return x
        k = (h // oh, w // ow)
        return Value(self._emit(G.avgpool(self.unique(name), x.tensor, k, k)), True)

    def global_avgpool(self, name: str, x: Value, where: str) -> Value:
        self._need_spatial(x, where)
        return Value(self._emit(G.global_avgpool(self.unique(name), x.tensor)), True)

    def flatten(self, name: str, x: Value) -> Value:
        """(C, H, W) -> flat; the IR's order is H, W, C, so the permutation stays pending
        (unless the source transposed to (H, W, C) first: then the orders agree)."""
        if not x.spatial:
            return x
        h, w, c = self.shape(x)
        node = G.flatten(self.unique(name), x.tensor)
        return Value(self._emit(node), False, (c, h, w) if h * w > 1 and not x.nhwc else None)

    def to_nhwc(self, x: Value, where: str) -> Value:
        """A transpose (N, C, H, W) -> (N, H, W, C): no IR node, the flatten after it keeps HWC order."""
        self._need_spatial(x, where)
        return Value(x.tensor, True, None, nhwc=True)

    def add(self, name: str, a: Value, b: Value, where: str) -> Value:
        if (a.spatial, a.pending, a.nhwc) != (b.spatial, b.pending, b.nhwc):
            raise InteropError(f"{where}: adds tensors of different layouts (a feature map and a "
                               "flattened one); both operands must have the same shape")
        return Value(self._emit(G.add(self.unique(name), a.tensor, b.tensor)), a.spatial, a.pending, a.nhwc)

    def producer(self, v: Value) -> Node | None:
        for n in self.nodes:
            if n.name == v.tensor:
                return n
        return None

    # -- the result
    def finish(self, out: Value) -> Graph:
        """Keep what the output needs, check the output is logits, fold BatchNorm, fuse activations."""
        if out.tensor == INPUT:
            raise InteropError("the model has no layers: its output is its input")
        needed, todo = set(), [out.tensor]
        by_name = {n.name: n for n in self.nodes}
        while todo:
            t = todo.pop()
            if t in needed or t == INPUT:
                continue
            needed.add(t)
            todo.extend(by_name[t].inputs)
        nodes = [n for n in self.nodes if n.name in needed]
        try:
            g = Graph(self.input_shape, nodes, self.name)
            shape = g.shape(out.tensor)
            if (out.spatial and shape[0] * shape[1] > 1) or out.pending is not None or out.nhwc:
                raise InteropError(f"the model's output is a feature map of shape {shape} (NHWC); "
                                   "mcutrain models end in logits (N, K): end with a Linear or a "
                                   "global average pool")
            if any(n.op == Op.BATCHNORM for n in g.nodes):
                g = P.fold_batchnorm(g)
            g = P.fuse_activations(g)
            self.source_names = {n.name: self._original[n.name] for n in g.nodes if n.name in self._original}
            return g
        except GraphError as e:
            raise InteropError(f"the converted graph is invalid: {e}") from None
