"""The model IR: a list of nodes in topological order, shapes inferred once.

Every later stage (engines, methods, planner, code generator) reads this one
structure, so it is deliberately plain: a node names its op, the tensors it
reads, the tensor it writes (always the node's own name), its attributes and
its parameters. Activations are NHWC and weights OHWI (the CMSIS-NN / TFLite
Micro convention), so the C runtime never transposes. Shapes are per sample;
the batch dimension is implicit everywhere.

Example:
    >>> g = Graph((8, 8, 1), [
    ...     conv2d("conv", "input", 4, 3, padding=1, act="relu", in_channels=1),
    ...     flatten("flat", "conv"),
    ...     linear("fc", "flat", 10, in_features=256)])
    >>> g.shape("fc")
    (10,)
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mcutrain.limits import MAX_DIM, MAX_MACS, MAX_PARAMS, MAX_TENSOR_ELEMENTS

INPUT = "input"

NAME_MAX = 64
"""Longest node or graph name, in characters."""
NAME_RULE = (f"a letter or '_' first, then letters, digits, '_', '.' or '-' (ASCII), "
             f"at most {NAME_MAX} characters")
"""The naming rule in words, for error messages and docs."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


class Op(str, enum.Enum):
    """The op vocabulary. Passes ask the property sets below, not lists of names."""

    CONV2D = "conv2d"
    LINEAR = "linear"
    RELU = "relu"
    RELU6 = "relu6"
    MAXPOOL = "maxpool"
    AVGPOOL = "avgpool"
    GLOBAL_AVGPOOL = "global_avgpool"
    FLATTEN = "flatten"
    ADD = "add"
    BATCHNORM = "batchnorm"
    SOFTMAX_CE = "softmax_cross_entropy"


PARAMETRIC = frozenset({Op.CONV2D, Op.LINEAR})
"""Ops with weights and biases: the trainable ones."""
ACTIVATIONS = frozenset({Op.RELU, Op.RELU6})
"""Elementwise clamps that fuse into the producer's requantization."""
FUSES_ACTIVATION = frozenset({Op.CONV2D, Op.LINEAR, Op.ADD})
"""Ops that carry an `act` attribute (none / relu / relu6)."""
IMPORT_ONLY = frozenset({Op.BATCHNORM})
"""Ops that exist only until `fold_batchnorm` removes them."""
LOSS = frozenset({Op.SOFTMAX_CE})
"""Ops a method appends at training time; a model graph ends at its logits."""

ACT_NAMES = ("none", "relu", "relu6")


class GraphError(ValueError):
    """A graph that cannot be built or loaded; the message names the node."""


@dataclass
class Node:
    """One op application. Its output tensor carries the node's name."""

    name: str
    op: Op
    inputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def output(self) -> str:
        return self.name

    @property
    def act(self) -> str:
        return self.attrs.get("act", "none")


def _pair(v: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    a, b = v
    return int(a), int(b)


def _padding4(v: int | tuple | list) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) from an int, an (h, w) pair or a 4-tuple."""
    if isinstance(v, (int, np.integer)):
        return (int(v),) * 4
    v = tuple(int(x) for x in v)
    if len(v) == 2:
        return v[0], v[0], v[1], v[1]
    if len(v) == 4:
        return v  # type: ignore[return-value]
    raise GraphError(f"padding must be an int, (h, w) or (top, bottom, left, right), got {v}")


# ---------------------------------------------------------------- constructors


def conv2d(name: str, src: str, out_channels: int, kernel: int | tuple[int, int],
           stride: int | tuple[int, int] = 1, padding: int | tuple = 0, groups: int = 1,
           act: str = "none", in_channels: int | None = None,
           weight: np.ndarray | None = None, bias: np.ndarray | None = None) -> Node:
    """A 2-D convolution, NHWC in, OHWI weights of shape (O, kh, kw, I/groups).

    Pass `in_channels` (or `weight`) so the weight can be allocated; values are
    zeros until an initializer or a loaded file fills them.
    """
    kh, kw = _pair(kernel)
    if weight is None:
        if in_channels is None:
            raise GraphError(f"node '{name}': conv2d needs in_channels or a weight")
        if in_channels % groups:
            raise GraphError(f"node '{name}': in_channels {in_channels} not divisible by groups {groups}")
        weight = np.zeros((out_channels, kh, kw, in_channels // groups), np.float32)
    if bias is None:
        bias = np.zeros(out_channels, np.float32)
    return Node(name, Op.CONV2D, [src],
                {"out_channels": int(out_channels), "kernel": (kh, kw), "stride": _pair(stride),
                 "padding": _padding4(padding), "groups": int(groups), "act": act},
                {"weight": weight, "bias": bias})


def linear(name: str, src: str, out_features: int, act: str = "none",
           in_features: int | None = None, weight: np.ndarray | None = None,
           bias: np.ndarray | None = None) -> Node:
    """A fully connected layer on a flat (F,) input; weight (O, I)."""
    if weight is None:
        if in_features is None:
            raise GraphError(f"node '{name}': linear needs in_features or a weight")
        weight = np.zeros((out_features, in_features), np.float32)
    if bias is None:
        bias = np.zeros(out_features, np.float32)
    return Node(name, Op.LINEAR, [src], {"out_features": int(out_features), "act": act},
                {"weight": weight, "bias": bias})


def relu(name: str, src: str) -> Node:
    return Node(name, Op.RELU, [src])


def relu6(name: str, src: str) -> Node:
    return Node(name, Op.RELU6, [src])


def maxpool(name: str, src: str, kernel: int | tuple[int, int], stride=None) -> Node:
    k = _pair(kernel)
    return Node(name, Op.MAXPOOL, [src], {"kernel": k, "stride": _pair(stride) if stride else k})


def avgpool(name: str, src: str, kernel: int | tuple[int, int], stride=None) -> Node:
    k = _pair(kernel)
    return Node(name, Op.AVGPOOL, [src], {"kernel": k, "stride": _pair(stride) if stride else k})


def global_avgpool(name: str, src: str) -> Node:
    """Mean over H and W; output (1, 1, C), so a `flatten` after it is explicit."""
    return Node(name, Op.GLOBAL_AVGPOOL, [src])


def flatten(name: str, src: str) -> Node:
    """(H, W, C) -> (H*W*C,) in NHWC order."""
    return Node(name, Op.FLATTEN, [src])


def add(name: str, a: str, b: str, act: str = "none") -> Node:
    """Elementwise sum of two same-shaped tensors (residual connections)."""
    return Node(name, Op.ADD, [a, b], {"act": act})


def batchnorm(name: str, src: str, gamma, beta, mean, var, eps: float = 1e-5) -> Node:
    """Import-time only: `fold_batchnorm` merges it into the conv/linear before it."""
    f = lambda a: np.asarray(a, np.float32)
    return Node(name, Op.BATCHNORM, [src], {"eps": float(eps)},
                {"gamma": f(gamma), "beta": f(beta), "mean": f(mean), "var": f(var)})


# ---------------------------------------------------------------- shape rules


def _out_len(size: int, k: int, s: int, pad: int) -> int:
    return (size + pad - k) // s + 1


PARAM_NAMES = {Op.CONV2D: ("bias", "weight"), Op.LINEAR: ("bias", "weight"),
               Op.BATCHNORM: ("beta", "gamma", "mean", "var")}
"""The parameters each op has (sorted); every other op has none."""


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _attr_ints(where: str, a: dict[str, Any], key: str, n: int, lo: int) -> tuple[int, ...]:
    """Attribute `key` as `n` whole numbers in [lo, MAX_DIM] (an int counts for all n)."""
    v = a.get(key)
    vals = (v,) * n if _is_int(v) else tuple(v) if isinstance(v, (tuple, list)) else None
    if vals is None or len(vals) != n or not all(_is_int(x) and lo <= x <= MAX_DIM for x in vals):
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


def _infer(node: Node, ins: list[tuple[int, ...]]) -> tuple[int, ...]:
    """Output shape of one node from its input shapes; GraphError on mismatch.

    Every attribute is checked (whole numbers, in range), every parameter is a finite float
    array, and no tensor exceeds `limits.MAX_TENSOR_ELEMENTS`: a model file is outside input.
    """
    out = _infer_shape(node, ins)
    _check_size(f"node '{node.name}' ({node.op.value})", "output", out)
    return out


def _infer_shape(node: Node, ins: list[tuple[int, ...]]) -> tuple[int, ...]:
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


# ---------------------------------------------------------------- names


def name_problem(name: object) -> str | None:
    """What is wrong with `name` as a node or graph name, or None when it follows `NAME_RULE`.

    Why a closed set: names reach generated C (identifiers, comments, string literals) and
    reports; a name that can only hold these characters cannot end a comment, start a
    preprocessor line or smuggle code into a generated file.
    """
    if not isinstance(name, str):
        return f"must be a string, got {type(name).__name__}"
    if not name:
        return "is empty"
    if len(name) > NAME_MAX:
        return f"has {len(name)} characters, more than {NAME_MAX}"
    if not _NAME.fullmatch(name):
        if not _NAME.match(name[0]):
            return "does not start with a letter or '_'"
        return "holds characters outside the allowed set"
    return None


def _shown(name: object) -> str:
    """`name` quoted with escapes (a newline shows as \\n), cut short: a huge name cannot flood a message."""
    text = repr(name)
    return text if len(text) <= 80 else text[:77] + "..."


def _validate_names(graph_name: object, nodes: list[Node]) -> None:
    """Refuse a graph or node name outside `NAME_RULE`; the message names the node."""
    why = name_problem(graph_name)
    if why:
        raise GraphError(f"graph name {_shown(graph_name)} {why}; names use {NAME_RULE}")
    for node in nodes:
        why = name_problem(node.name)
        if why:
            raise GraphError(f"node {_shown(node.name)}: name {why}; names use {NAME_RULE} "
                             "(mcutrain import renames foreign names: re-import the model)")


# ---------------------------------------------------------------- the graph


class Graph:
    """Nodes in topological order over one input tensor named 'input'.

    Construction validates everything (names against `NAME_RULE`, references, shapes,
    parameter shapes) and infers every tensor's per-sample shape; a bad graph raises a
    GraphError that names the node.
    """

    def __init__(self, input_shape: tuple[int, ...], nodes: list[Node], name: str = "model"):
        self.input_shape = tuple(int(d) for d in input_shape)
        self.nodes = list(nodes)
        self.name = name
        self.shapes: dict[str, tuple[int, ...]] = {}
        self._validate()

    def _validate(self) -> None:
        if not self.nodes:
            raise GraphError("graph has no nodes")
        if not self.input_shape or min(self.input_shape) < 1:
            raise GraphError(f"input shape {self.input_shape} must be non-empty and positive")
        _validate_names(self.name, self.nodes)
        shapes = {INPUT: self.input_shape}
        for node in self.nodes:
            if not isinstance(node.op, Op):
                try:
                    node.op = Op(node.op)
                except ValueError:
                    raise GraphError(f"node '{node.name}': unknown op {node.op!r}; supported: "
                                     f"{', '.join(o.value for o in Op)}") from None
            if node.name in shapes:
                raise GraphError(f"node '{node.name}': name used twice (or is the reserved 'input')")
            for src in node.inputs:
                if src not in shapes:
                    raise GraphError(f"node '{node.name}': input '{src}' is not produced by an "
                                     "earlier node (nodes must be in topological order)")
            shapes[node.name] = _infer(node, [shapes[s] for s in node.inputs])
        self.shapes = shapes

    # -- lookups
    @property
    def output(self) -> str:
        return self.nodes[-1].name

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self.shapes[self.output]

    @property
    def num_classes(self) -> int:
        return int(np.prod(self.output_shape))

    def shape(self, tensor: str) -> tuple[int, ...]:
        return self.shapes[tensor]

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node named '{name}'; nodes: {', '.join(n.name for n in self.nodes)}")

    def parametric(self) -> list[Node]:
        """The nodes with weights, in order: what `last:N` counts."""
        return [n for n in self.nodes if n.op in PARAMETRIC]

    def consumers(self, tensor: str) -> list[Node]:
        return [n for n in self.nodes if tensor in n.inputs]

    # -- accounting
    def macs(self, node: Node) -> int:
        """Multiply-accumulates of one forward pass of one sample through `node`."""
        if node.op == Op.CONV2D:
            ho, wo, o = self.shapes[node.name]
            _, kh, kw, cig = node.params["weight"].shape
            return ho * wo * o * kh * kw * cig
        if node.op == Op.LINEAR:
            return int(node.params["weight"].size)
        return 0

    def total_macs(self) -> int:
        return sum(self.macs(n) for n in self.nodes)

    def num_params(self, node: Node | None = None) -> int:
        nodes = [node] if node is not None else self.nodes
        return sum(int(p.size) for n in nodes for p in n.params.values())

    def summary(self) -> str:
        """A readable table: node, op, output shape, params, MACs."""
        rows = [f"{'node':<18} {'op':<15} {'output':<16} {'params':>9} {'MACs':>11}"]
        for n in self.nodes:
            rows.append(f"{n.name:<18} {n.op.value:<15} {self.shapes[n.name]!s:<16} "
                        f"{self.num_params(n):>9,} {self.macs(n):>11,}")
        rows.append(f"{'total':<51} {self.num_params():>9,} {self.total_macs():>11,}")
        return "\n".join(rows)

    # -- copies and (de)serialization of the structure
    def copy(self) -> Graph:
        nodes = [Node(n.name, n.op, list(n.inputs), dict(n.attrs),
                      {k: v.copy() for k, v in n.params.items()}) for n in self.nodes]
        return Graph(self.input_shape, nodes, self.name)

    def to_dict(self) -> dict[str, Any]:
        """The structure as JSON-able data; parameters are referenced by key."""
        return {
            "name": self.name,
            "input_shape": list(self.input_shape),
            "nodes": [{"name": n.name, "op": n.op.value, "inputs": list(n.inputs),
                       "attrs": {k: list(v) if isinstance(v, tuple) else v for k, v in n.attrs.items()},
                       "params": sorted(n.params)} for n in self.nodes],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], arrays: dict[str, np.ndarray]) -> Graph:
        """Rebuild from `to_dict` output and arrays keyed '<node>.<param>'.

        The description comes from a file, so every field's type is checked first (see
        `check_description`); a wrong one is a GraphError naming the node and the field.
        """
        check_description(d)
        try:
            nodes = []
            for nd in d["nodes"]:
                attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in nd["attrs"].items()}
                params = {}
                for p in nd["params"]:
                    key = f"{nd['name']}.{p}"
                    if key not in arrays:
                        raise GraphError(f"node '{nd['name']}': parameter array '{key}' is missing")
                    params[p] = arrays[key]
                nodes.append(Node(nd["name"], nd["op"], list(nd["inputs"]), attrs, params))
            return cls(tuple(d["input_shape"]), nodes, d.get("name", "model"))
        except (KeyError, TypeError, IndexError) as e:
            raise GraphError(f"graph description is malformed: missing or wrong field {e}") from None

    def arrays(self) -> dict[str, np.ndarray]:
        return {f"{n.name}.{k}": v for n in self.nodes for k, v in n.params.items()}


def check_description(d: Any) -> None:
    """Refuse a graph description (`Graph.to_dict` output read from a file) with wrong field types.

    Checked: the input shape (1 or 3 whole numbers in 1..MAX_DIM), the node list (at most
    `limits.MAX_NODES`), each node's name and op (strings), inputs and params (lists of
    strings), attrs (an object of numbers, strings or lists of numbers). Values are checked
    by the shape rules (`_infer`) once the graph is built.
    """
    from mcutrain.limits import MAX_NAME_CHARS, MAX_NODES
    if not isinstance(d, dict):
        raise GraphError(f"graph description must be an object, got {type(d).__name__}")
    shape = d.get("input_shape")
    if not isinstance(shape, list) or len(shape) not in (1, 3) \
            or not all(_is_int(v) and 1 <= v <= MAX_DIM for v in shape):
        raise GraphError(f"input_shape must be 1 or 3 whole numbers in 1..{MAX_DIM}, got {shape!r}")
    if not isinstance(d.get("name", "model"), str):
        raise GraphError("the graph's name must be a string")
    nodes = d.get("nodes")
    if not isinstance(nodes, list) or not 1 <= len(nodes) <= MAX_NODES:
        raise GraphError(f"nodes must be a list of 1..{MAX_NODES} nodes")
    scalar = (int, float, str, bool, type(None))
    for i, nd in enumerate(nodes):
        if not isinstance(nd, dict):
            raise GraphError(f"node {i} must be an object, got {type(nd).__name__}")
        name = nd.get("name")
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_CHARS:
            raise GraphError(f"node {i}: name must be a string of 1..{MAX_NAME_CHARS} characters")
        where = f"node '{name}'"
        if not isinstance(nd.get("op"), str):
            raise GraphError(f"{where}: op must be a string, got {nd.get('op')!r}")
        for key in ("inputs", "params"):
            v = nd.get(key)
            if not isinstance(v, list) or len(v) > 8 or not all(isinstance(s, str) for s in v):
                raise GraphError(f"{where}: {key} must be a short list of strings, got {v!r}")
        attrs = nd.get("attrs")
        if not isinstance(attrs, dict):
            raise GraphError(f"{where}: attrs must be an object, got {type(attrs).__name__}")
        for k, v in attrs.items():
            ok = isinstance(v, scalar) or (isinstance(v, list) and len(v) <= 8
                                           and all(isinstance(x, (int, float)) for x in v))
            if not ok:
                raise GraphError(f"{where}: attribute '{k}' must be a number, a string or a short "
                                 f"list of numbers, got {v!r}")


# ---------------------------------------------------------------- passes


def fold_batchnorm(graph: Graph) -> Graph:
    """Merge every BatchNorm into the conv/linear that feeds it (import time).

    y = gamma * (Wx + b - mean) / sqrt(var + eps) + beta becomes W' x + b'
    with W' = W * k per output channel and b' = (b - mean) * k + beta.
    The producer must have no other consumer and no fused activation.
    """
    g = graph.copy()
    out: list[Node] = []
    rename: dict[str, str] = {}
    by_name = {n.name: n for n in g.nodes}
    for n in g.nodes:
        n.inputs = [rename.get(s, s) for s in n.inputs]
        if n.op != Op.BATCHNORM:
            out.append(n)
            continue
        src = by_name.get(n.inputs[0])
        if src is None or src.op not in PARAMETRIC or src.act != "none":
            raise GraphError(f"node '{n.name}': BatchNorm can only be folded into a conv2d/linear "
                             "without a fused activation directly before it")
        if len(g.consumers(src.name)) > 1:
            raise GraphError(f"node '{n.name}': '{src.name}' feeds other nodes too; cannot fold")
        p = n.params
        k = (p["gamma"] / np.sqrt(p["var"].astype(np.float64) + n.attrs["eps"])).astype(np.float64)
        w = src.params["weight"].astype(np.float64)
        src.params["weight"] = (w * k.reshape((-1,) + (1,) * (w.ndim - 1))).astype(np.float32)
        src.params["bias"] = ((src.params["bias"] - p["mean"]) * k + p["beta"]).astype(np.float32)
        rename[n.name] = src.name
    return Graph(g.input_shape, out, g.name)


def fuse_activations(graph: Graph) -> Graph:
    """Fold each relu/relu6 into the conv/linear/add before it when it is the only consumer."""
    g = graph.copy()
    by_name = {n.name: n for n in g.nodes}
    rename: dict[str, str] = {}
    out: list[Node] = []
    for n in g.nodes:
        n.inputs = [rename.get(s, s) for s in n.inputs]
        src = by_name.get(n.inputs[0]) if n.inputs else None
        if (n.op in ACTIVATIONS and src is not None and src.op in FUSES_ACTIVATION
                and src.act == "none" and len(g.consumers(src.name)) == 1):
            src.attrs["act"] = n.op.value
            rename[n.name] = src.name
            continue
        out.append(n)
    return Graph(g.input_shape, out, g.name)
