"""The IR's vocabulary: the ops, their property sets, nodes, the name rule and the constructors.

Kept apart from `graph.Graph` so that the shape rules (`graph_shapes`) and the check of a
file's graph description (`graph_description`) can use the vocabulary without importing the
graph that uses them. Import these names from `mcutrain.graph`, the IR's public face.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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


def validate_names(graph_name: object, nodes: list[Node]) -> None:
    """Refuse a graph or node name outside `NAME_RULE`; the message names the node."""
    why = name_problem(graph_name)
    if why:
        raise GraphError(f"graph name {_shown(graph_name)} {why}; names use {NAME_RULE}")
    for node in nodes:
        why = name_problem(node.name)
        if why:
            raise GraphError(f"node {_shown(node.name)}: name {why}; names use {NAME_RULE} "
                             "(mcutrain import renames foreign names: re-import the model)")
