"""Graph rewrites applied at import and before quantization: BatchNorm folding, activation fusion.

They return new graphs (the input is not changed) and are kept apart from the IR itself,
which only describes and validates a graph.
"""

from __future__ import annotations

import numpy as np

from mcutrain.graph import ACTIVATIONS, FUSES_ACTIVATION, PARAMETRIC, Graph, GraphError, Node, Op


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
