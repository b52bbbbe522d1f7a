"""The first check of a graph description read from a file, before any `Node` is built.

`io.load` parses a model file's JSON itself; this refuses wrong field types (a node that is
a list, an input shape of strings, 100 inputs) with a message naming the node, so that the
IR constructors only ever see the types they were written for. Values (sizes, strides, ...)
are then checked by the shape rules in `graph`.
"""

from __future__ import annotations

from typing import Any

from mcutrain.graph_ops import GraphError
from mcutrain.graph_shapes import is_whole_number
from mcutrain.limits import MAX_DIM, MAX_NAME_CHARS, MAX_NODES


def check_description(d: Any) -> None:
    """Refuse a graph description (`Graph.to_dict` output read from a file) with wrong field types.

    Checked: the input shape (1 or 3 whole numbers in 1..MAX_DIM), the node list (at most
    `limits.MAX_NODES`), each node's name and op (strings), inputs and params (lists of
    strings), attrs (an object of numbers, strings or lists of numbers). Values are checked
    by the shape rules (`graph._infer`) once the graph is built.
    """
    if not isinstance(d, dict):
        raise GraphError(f"graph description must be an object, got {type(d).__name__}")
    shape = d.get("input_shape")
    if not isinstance(shape, list) or len(shape) not in (1, 3) \
            or not all(is_whole_number(v) and 1 <= v <= MAX_DIM for v in shape):
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
