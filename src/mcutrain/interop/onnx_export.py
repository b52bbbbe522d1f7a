"""ONNX export: a float graph as float ONNX, an int8 `QuantModel` as ONNX QDQ.

QDQ ("quantize-dequantize") is the ONNX form of a quantized model that every
runtime reads: float ops between QuantizeLinear/DequantizeLinear pairs
(onnxruntime fuses each DQ -> op -> Q into an integer kernel). Here:
- the input is quantized with the input's (s, z) and dequantized;
- each weight is an int8 initializer behind a DequantizeLinear with
  per-output-channel scales (axis=0) and zero points 0;
- each bias is an int32 initializer behind a DequantizeLinear with scale
  s_x * s_w[c] (the int32 bias convention of docs/integer-semantics.md);
- every node output is quantized with that tensor's (s_y, z_y), after the
  fused relu/relu6 (Relu, Clip(0, 6)), and dequantized for the next op;
- the output is the dequantized logits (N, K), float.

The ONNX model is NCHW, as ONNX runtimes expect: conv weights OHWI -> OIHW,
and a linear layer after a flatten of an (H, W, C) map gets its input
columns permuted from H, W, C to C, H, W order (or, when the flatten feeds
anything but linear layers, a Transpose to NHWC goes before the Flatten).
Rounding differs from the integer engine (onnxruntime rounds half to even and
requantizes with a float multiplier), so predictions agree on nearly all
samples, not bit for bit.

onnx is imported only when exporting.

Example:
    >>> from mcutrain import zoo
    >>> m = to_onnx(zoo.build("digits-cnn"))
    >>> [n.op_type for n in m.graph.node]
    ['Conv', 'Relu', 'Conv', 'Relu', 'Flatten', 'Gemm']
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mcutrain import io
from mcutrain.graph import INPUT, Graph, Node, Op
from mcutrain.graph_passes import fold_batchnorm
from mcutrain.interop.builder import InteropError, hwc_to_chw_columns
from mcutrain.interop.onnx_import import _onnx
from mcutrain.qmodel import QuantModel

OPSET = 13
"""Opset 13: per-channel DequantizeLinear (axis) and Clip with min/max inputs."""
IR_VERSION = 8
"""The ONNX file format version of opset 13; newer runtimes read it, older ones still do."""


class _Writer:
    """Emits ONNX nodes for one graph; `names[t]` is the ONNX (float) tensor holding IR tensor t."""

    def __init__(self, onnx, graph: Graph, qm: QuantModel | None):
        from onnx import helper, numpy_helper
        self.onnx, self.h, self.nh = onnx, helper, numpy_helper
        self.g, self.qm = graph, qm
        self.nodes: list = []
        self.inits: dict[str, object] = {}
        self.names: dict[str, str] = {}
        self.chw_flat: dict[str, tuple[int, int, int]] = {}

    def init(self, name: str, array: np.ndarray) -> str:
        if name not in self.inits:
            a = np.asarray(array)
            self.inits[name] = self.nh.from_array(a if a.ndim == 0 else np.ascontiguousarray(a), name)
        return name

    def node(self, op: str, inputs: list[str], output: str, node_name: str | None = None, **attrs) -> str:
        """Append one node writing `output`; the main op of an IR node carries the IR node's name
        (so a re-import gets the same names), helper nodes their output's name."""
        self.nodes.append(self.h.make_node(op, inputs, [output], name=node_name or output, **attrs))
        return output

    # -- quantization
    def qdq(self, tensor: str, x: str) -> str:
        """Quantize float `x` with IR tensor `tensor`'s qparams and dequantize it again."""
        if self.qm is None:
            return x
        qp = self.qm.act_qparams[tensor]
        s = self.init(f"{tensor}.scale", np.float32(qp.scale))
        z = self.init(f"{tensor}.zero_point", np.int8(qp.zero_point))
        q = self.node("QuantizeLinear", [x, s, z], f"{tensor}/q")
        return self.node("DequantizeLinear", [q, s, z], f"{tensor}/dq")

    def params(self, n: Node, weight: np.ndarray) -> tuple[str, str]:
        """(weight, bias) tensor names: float initializers, or int8/int32 behind DequantizeLinear.

        `weight` is the float weight in ONNX layout; in QDQ mode the int8
        weight is laid out the same way from the QuantModel's (one transform, two dtypes).
        """
        if self.qm is None:
            return (self.init(f"{n.name}.weight", weight.astype(np.float32)),
                    self.init(f"{n.name}.bias", n.params["bias"].astype(np.float32)))
        o = weight.shape[0]
        wq = self._onnx_layout(n, self.qm.weights[n.name])
        sw = np.broadcast_to(self.qm.weight_qparams[n.name].scale, (o,)).astype(np.float32)
        sx = np.float32(self.qm.act_qparams[n.inputs[0]].scale)
        w = self.node("DequantizeLinear", [self.init(f"{n.name}.weight_q", wq),
                                           self.init(f"{n.name}.weight_scale", sw),
                                           self.init(f"{n.name}.weight_zero_point", np.zeros(o, np.int8))],
                      f"{n.name}.weight", axis=0)
        b = self.node("DequantizeLinear", [self.init(f"{n.name}.bias_q", self.qm.biases[n.name]),
                                           self.init(f"{n.name}.bias_scale", (sx * sw).astype(np.float32)),
                                           self.init(f"{n.name}.bias_zero_point", np.zeros(o, np.int32))],
                      f"{n.name}.bias", axis=0)
        return w, b

    def _onnx_layout(self, n: Node, w: np.ndarray) -> np.ndarray:
        if n.op == Op.CONV2D:
            return np.ascontiguousarray(w.transpose(0, 3, 1, 2))
        hwc = self.chw_flat.get(n.inputs[0])
        return hwc_to_chw_columns(w, hwc) if hwc else w

    def act(self, n: Node, x: str, act: str) -> str:
        main = n.name if n.op in (Op.RELU, Op.RELU6) else None
        if act == "relu":
            return self.node("Relu", [x], f"{n.name}/relu", main)
        if act == "relu6":
            lo, hi = self.init("relu6.min", np.float32(0)), self.init("relu6.max", np.float32(6))
            return self.node("Clip", [x, lo, hi], f"{n.name}/relu6", main)
        return x

    # -- ops
    def emit(self, n: Node) -> None:
        x = self.names[n.inputs[0]]
        a = n.attrs
        if n.op == Op.CONV2D:
            w, b = self.params(n, self._onnx_layout(n, n.params["weight"]))
            pt, pb, pl, pr = a["padding"]
            y = self.node("Conv", [x, w, b], f"{n.name}/conv", n.name, kernel_shape=list(a["kernel"]),
                          strides=list(a["stride"]), pads=[pt, pl, pb, pr], group=a["groups"],
                          dilations=[1, 1])
            y = self.act(n, y, n.act)
        elif n.op == Op.LINEAR:
            w, b = self.params(n, self._onnx_layout(n, n.params["weight"]))
            y = self.act(n, self.node("Gemm", [x, w, b], f"{n.name}/gemm", n.name, transB=1), n.act)
        elif n.op in (Op.MAXPOOL, Op.AVGPOOL):
            op = "MaxPool" if n.op == Op.MAXPOOL else "AveragePool"
            y = self.node(op, [x], f"{n.name}/pool", n.name, kernel_shape=list(a["kernel"]),
                          strides=list(a["stride"]))
        elif n.op == Op.GLOBAL_AVGPOOL:
            y = self.node("GlobalAveragePool", [x], f"{n.name}/pool", n.name)
        elif n.op == Op.FLATTEN:
            y = self.flatten(n, x)
        elif n.op in (Op.RELU, Op.RELU6):
            y = self.act(n, x, n.op.value)
        elif n.op == Op.ADD:
            y = self.act(n, self.node("Add", [x, self.names[n.inputs[1]]], f"{n.name}/add", n.name), n.act)
        else:
            raise InteropError(f"node '{n.name}': op {n.op.value} has no ONNX export")
        self.names[n.name] = self.qdq(n.name, y)

    def flatten(self, n: Node, x: str) -> str:
        """Flatten in ONNX's C, H, W order when only linear layers read it (their columns follow);
        otherwise transpose to NHWC first, so the flat order is the IR's."""
        shape = self.g.shape(n.inputs[0])
        if len(shape) != 3 or shape[0] * shape[1] == 1:
            return self.node("Flatten", [x], f"{n.name}/flatten", n.name, axis=1)
        users = self.g.consumers(n.name)
        if users and all(u.op == Op.LINEAR for u in users) and n.name != self.g.output:
            self.chw_flat[n.name] = shape
            return self.node("Flatten", [x], f"{n.name}/flatten", n.name, axis=1)
        t = self.node("Transpose", [x], f"{n.name}/nhwc", perm=[0, 2, 3, 1])
        return self.node("Flatten", [t], f"{n.name}/flatten", n.name, axis=1)


def _nchw(shape: tuple[int, ...]) -> list:
    return ["N", shape[2], shape[0], shape[1]] if len(shape) == 3 else ["N", *shape]


def to_onnx(model: Graph | QuantModel, name: str | None = None):
    """An ONNX ModelProto of a float graph (float ops) or a QuantModel (QDQ, int8 weights).

    Input 'input' is float NCHW (N, C, H, W) (or (N, F)); output 'logits' is
    float (N, K) — dequantized int8 logits for a QuantModel.
    """
    onnx = _onnx()
    from onnx import TensorProto, helper
    qm = model if isinstance(model, QuantModel) else None
    graph = qm.graph if qm is not None else model
    if not isinstance(graph, Graph):
        raise InteropError(f"to_onnx needs a Graph or a QuantModel, got {type(model).__name__}")
    if any(n.op == Op.BATCHNORM for n in graph.nodes):
        graph = fold_batchnorm(graph)
    w = _Writer(onnx, graph, qm)
    w.names[INPUT] = w.qdq(INPUT, INPUT)
    for n in graph.nodes:
        w.emit(n)
    w.nodes[-1].output[0] = "logits"  # the last node (a DequantizeLinear or an op) writes the output
    out_shape = graph.output_shape
    g = helper.make_graph(
        w.nodes, name or graph.name,
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, _nchw(graph.input_shape))],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, _nchw(out_shape))],
        list(w.inits.values()))
    m = helper.make_model(g, producer_name="mcutrain", opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = IR_VERSION
    m.doc_string = ("int8 QDQ model (per-channel int8 weights, int32 biases)" if qm is not None
                    else "float model")
    onnx.checker.check_model(m)
    return m


def save_onnx(model: Graph | QuantModel, path: str | Path, name: str | None = None) -> Path:
    """Export with `to_onnx` and write the .onnx file atomically."""
    data = to_onnx(model, name).SerializeToString()
    path = Path(path)
    io.atomic_write_bytes(path, lambda f: f.write(data))
    return path
