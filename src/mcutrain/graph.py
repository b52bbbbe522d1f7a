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

from typing import Any

import numpy as np

from mcutrain.graph_description import check_description
from mcutrain.graph_ops import (
    ACT_NAMES,
    ACTIVATIONS,
    FUSES_ACTIVATION,
    IMPORT_ONLY,
    INPUT,
    LOSS,
    NAME_MAX,
    NAME_RULE,
    PARAMETRIC,
    GraphError,
    Node,
    Op,
    add,
    avgpool,
    batchnorm,
    conv2d,
    flatten,
    global_avgpool,
    linear,
    maxpool,
    name_problem,
    relu,
    relu6,
    validate_names,
)
from mcutrain.graph_shapes import PARAM_NAMES, infer_shape, is_whole_number

__all__ = ["ACTIVATIONS", "ACT_NAMES", "FUSES_ACTIVATION", "IMPORT_ONLY", "INPUT", "LOSS", "NAME_MAX",
           "NAME_RULE", "PARAMETRIC", "PARAM_NAMES", "Graph", "GraphError", "Node", "Op", "add", "avgpool",
           "batchnorm", "conv2d", "flatten", "global_avgpool", "infer_shape", "is_whole_number", "linear",
           "maxpool", "name_problem", "relu", "relu6"]
# NOTE: this module is the IR's public face; the vocabulary lives in `graph_ops`, the shape rules in
# `graph_shapes`, the check of a file's description in `graph_description`, rewrites in `graph_passes`.


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
        validate_names(self.name, self.nodes)
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
            shapes[node.name] = infer_shape(node, [shapes[s] for s in node.inputs])
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
