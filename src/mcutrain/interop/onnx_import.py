"""ONNX import: a float ONNX model -> a float IR `Graph` with its weights.

The op set is the IR's: Conv (group), BatchNormalization (folded), Relu,
Clip(0, 6) as relu6, MaxPool, AveragePool, GlobalAveragePool, Flatten (and a
Reshape to (batch, -1)), Gemm, MatMul followed by Add of a constant (a
linear layer with bias), Add of two tensors (residuals), a Transpose to NHWC
right before a Flatten, Identity and Dropout. Weights must be initializers
or Constant nodes. Layout handling is that of `builder` (NCHW -> NHWC; the
first linear after a flatten gets its columns permuted).

onnx is imported only when `from_onnx` is called.

Example:
    >>> import onnx
    >>> from onnx import helper, numpy_helper, TensorProto
    >>> w = numpy_helper.from_array(np.ones((10, 64), np.float32), "w")
    >>> nodes = [helper.make_node("Flatten", ["x"], ["f"]),
    ...          helper.make_node("Gemm", ["f", "w"], ["y"], transB=1)]
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])
    >>> graph = helper.make_graph(nodes, "mlp", [x], [y], [w])
    >>> g = from_onnx(helper.make_model(graph))
    >>> g.input_shape, g.shape(g.output)
    ((8, 8, 1), (10,))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.graph import Graph, Op
from mcutrain.interop.builder import GraphBuilder, InteropError, Value, same_padding


def _onnx():
    try:
        import onnx
        from onnx import numpy_helper  # noqa: F401
    except ImportError:
        raise ImportError("reading and writing ONNX models needs onnx: pip install onnx") from None
    return onnx


class _Ctx:
    """One conversion: the builder, ONNX tensor name -> Value, constants, consumer counts."""

    def __init__(self, onnx, model, builder: GraphBuilder):
        self.onnx, self.b = onnx, builder
        from onnx import numpy_helper
        self.nh = numpy_helper
        self.env: dict[str, Value] = {}
        self.consts: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t)
                                              for t in model.graph.initializer}
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
        self.uses = Counter(i for n in model.graph.node for i in n.input if i)
        self.uses.update(o.name for o in model.graph.output)

    def attrs(self, node) -> dict[str, Any]:
        from onnx import helper
        return {a.name: helper.get_attribute_value(a) for a in node.attribute}

    def x(self, node, i: int = 0) -> Value:
        name = node.input[i]
        if name not in self.env:
            what = "a constant" if name in self.consts else "not produced by an earlier node"
            raise InteropError(f"{_where(node)}: input '{name}' is {what}; expected a tensor computed "
                               "from the model input")
        return self.env[name]

    def const(self, node, i: int, required: bool = True) -> np.ndarray | None:
        name = node.input[i] if i < len(node.input) else ""
        if not name:
            if required:
                raise InteropError(f"{_where(node)}: input {i} is missing")
            return None
        if name not in self.consts:
            raise InteropError(f"{_where(node)}: input '{name}' must be a constant (initializer or "
                               "Constant node); weights computed at run time are not supported")
        return self.consts[name]


def _where(node) -> str:
    return f"ONNX node '{node.name or node.output[0]}' ({node.op_type})"


def _name(node) -> str:
    return node.name or node.output[0]


def _ints(v, n: int, default: int) -> list[int]:
    return [int(a) for a in v] if v is not None else [default] * n


def _conv_pads(c: _Ctx, node, a: dict, x: Value, kernel: list[int], strides: list[int]
               ) -> tuple[int, int, int, int]:
    """ONNX pads [top, left, bottom, right] or auto_pad -> the IR's (top, bottom, left, right)."""
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        h, w, _ = c.b.shape(x)
        lower = auto == "SAME_LOWER"
        return same_padding(h, kernel[0], strides[0], lower) + same_padding(w, kernel[1], strides[1], lower)
    if auto == "VALID":
        return 0, 0, 0, 0
    t, left, bot, right = _ints(a.get("pads"), 4, 0)
    return t, bot, left, right


def _check_dilations(node, a: dict) -> None:
    if any(d != 1 for d in a.get("dilations", [1])):
        raise InteropError(f"{_where(node)}: dilations {list(a['dilations'])} are not supported (only 1)")


def _conv(c: _Ctx, node) -> Value:
    a, x = c.attrs(node), c.x(node)
    _check_dilations(node, a)
    w = c.const(node, 1)
    if w.ndim != 4:
        raise InteropError(f"{_where(node)}: only 2-D convolutions are supported (weight {w.shape})")
    kernel, strides = list(w.shape[2:]), _ints(a.get("strides"), 2, 1)
    pads = _conv_pads(c, node, a, x, kernel, strides)
    return c.b.conv(_name(node), x, w, c.const(node, 2, False), tuple(strides), pads,
                    int(a.get("group", 1)), _where(node))


def _batchnorm(c: _Ctx, node) -> Value:
    a = c.attrs(node)
    if a.get("training_mode", 0) or any(c.uses[o] for o in node.output[1:] if o):
        raise InteropError(f"{_where(node)}: training-mode BatchNormalization is not supported; "
                           "export the model in eval mode")
    gamma, beta, mean, var = (c.const(node, i) for i in range(1, 5))
    return c.b.batchnorm(_name(node), c.x(node), gamma, beta, mean, var,
                         float(a.get("epsilon", 1e-5)), _where(node))


def _clip(c: _Ctx, node) -> Value:
    if c.opset >= 11:
        lo, hi = c.const(node, 1, False), c.const(node, 2, False)
    else:
        a = c.attrs(node)
        lo, hi = a.get("min"), a.get("max")
    lo = float("-inf") if lo is None else float(np.asarray(lo).reshape(-1)[0])
    hi = float("inf") if hi is None else float(np.asarray(hi).reshape(-1)[0])
    if lo == 0 and hi in (6.0, float("inf")):
        return c.b.activation(_name(node), c.x(node), "relu6" if hi == 6 else "relu")
    raise InteropError(f"{_where(node)}: only Clip(0, 6) (relu6) and Clip(0) (relu) are supported, "
                       f"got min={lo}, max={hi}")


def _pool(kind: str) -> Callable[[_Ctx, Any], Value]:
    def convert(c: _Ctx, node) -> Value:
        a, x = c.attrs(node), c.x(node)
        _check_dilations(node, a)
        if kind == "max" and (a.get("storage_order", 0) or any(c.uses[o] for o in node.output[1:] if o)):
            raise InteropError(f"{_where(node)}: MaxPool indices / storage_order are not supported")
        kernel = _ints(a.get("kernel_shape"), 2, 1)
        strides = _ints(a.get("strides"), 2, 1)
        if any(_conv_pads(c, node, a, x, kernel, strides)):
            raise InteropError(f"{_where(node)}: padded pooling is not supported (the IR's pools have "
                               "no padding); pad with the convolution before it")
        return c.b.pool(kind, _name(node), x, tuple(kernel), tuple(strides), _where(node),
                        bool(a.get("ceil_mode", 0)))
    return convert


def _flatten(c: _Ctx, node) -> Value:
    axis = c.attrs(node).get("axis", 1)
    if axis != 1:
        raise InteropError(f"{_where(node)}: only Flatten with axis=1 is supported, got axis={axis}")
    return c.b.flatten(_name(node), c.x(node))


def _reshape(c: _Ctx, node) -> Value:
    x, shape = c.x(node), [int(s) for s in c.const(node, 1)]
    per_sample = int(np.prod(c.b.shape(x)))
    if len(shape) == 2 and (shape == [-1, per_sample] or (shape[0] >= 0 and shape[1] in (-1, per_sample))):
        return c.b.flatten(_name(node), x)
    raise InteropError(f"{_where(node)}: only a Reshape to (batch, -1) (a flatten) is supported, "
                       f"got shape {shape}")


def _gemm(c: _Ctx, node) -> Value:
    a = c.attrs(node)
    if a.get("transA", 0):
        raise InteropError(f"{_where(node)}: transA=1 is not supported")
    w = c.const(node, 1).astype(np.float64)
    w = (w if a.get("transB", 0) else w.T) * float(a.get("alpha", 1.0))
    bias = c.const(node, 2, False)
    if bias is not None:
        bias = (bias.astype(np.float64) * float(a.get("beta", 1.0))).reshape(-1)
    return c.b.linear(_name(node), c.x(node), w, bias, _where(node))


def _matmul(c: _Ctx, node) -> Value:
    w = c.const(node, 1)
    if w.ndim != 2:
        raise InteropError(f"{_where(node)}: the weight must be a 2-D constant, got shape {w.shape}")
    return c.b.linear(_name(node), c.x(node), w.T, None, _where(node))


def _add(c: _Ctx, node) -> Value:
    if all(i in c.env for i in node.input):
        return c.b.add(_name(node), c.x(node, 0), c.x(node, 1), _where(node))
    k = 0 if node.input[0] in c.env else 1
    return _fold_bias(c, node, c.x(node, k), c.const(node, 1 - k))


def _fold_bias(c: _Ctx, node, x: Value, const: np.ndarray) -> Value:
    """Add of a per-output-channel constant right after a conv/linear: it is that layer's bias."""
    producer = c.b.producer(x)
    uses = sum(c.uses[t] for t, v in c.env.items() if v is x)
    if producer is None or producer.op not in (Op.CONV2D, Op.LINEAR) or uses != 1:
        raise InteropError(f"{_where(node)}: adds a constant to a tensor that is not the sole use of "
                           "a Conv/Gemm/MatMul output; only bias additions and tensor + tensor "
                           "are supported")
    o = producer.params["bias"].shape[0]
    ok = [(), (1,)] + ([(o, 1, 1), (1, o, 1, 1)] if producer.op == Op.CONV2D else [(o,), (1, o)])
    if const.shape not in ok:
        raise InteropError(f"{_where(node)}: a constant of shape {const.shape} is not a per-channel "
                           f"bias of '{producer.name}' ({o} channels)")
    producer.params["bias"] = (producer.params["bias"] + const.astype(np.float32).reshape(-1)
                               ).astype(np.float32)
    return x


def _transpose(c: _Ctx, node) -> Value:
    perm = list(c.attrs(node).get("perm", []))
    if perm != [0, 2, 3, 1]:
        raise InteropError(f"{_where(node)}: only the NCHW -> NHWC transpose (perm [0, 2, 3, 1]) before "
                           f"a Flatten is supported, got perm {perm}")
    return c.b.to_nhwc(c.x(node), _where(node))


def _alias(c: _Ctx, node) -> Value:
    if node.op_type == "Dropout" and any(c.uses[o] for o in node.output[1:] if o):
        raise InteropError(f"{_where(node)}: the Dropout mask output is not supported")
    return c.x(node)


HANDLERS: dict[str, Callable[[_Ctx, Any], Value]] = {
    "Conv": _conv,
    "BatchNormalization": _batchnorm,
    "Relu": lambda c, n: c.b.activation(_name(n), c.x(n), "relu"),
    "Clip": _clip,
    "MaxPool": _pool("max"),
    "AveragePool": _pool("avg"),
    "GlobalAveragePool": lambda c, n: c.b.global_avgpool(_name(n), c.x(n), _where(n)),
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "Add": _add,
    "Transpose": _transpose,
    "Identity": _alias,
    "Dropout": _alias,
}
"""One converter per supported ONNX op; Constant nodes are read as constants."""


def _load(onnx, model):
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        try:
            return onnx.load_from_string(bytes(model))
        except Exception as e:   # protobuf's DecodeError and friends: not a model
            raise InteropError(f"the bytes are not a readable ONNX model: {e}") from None
    path = Path(model)
    if not path.is_file():
        raise InteropError(f"ONNX file {path} does not exist")
    try:
        return onnx.load(str(path))
    except Exception as e:
        raise InteropError(f"{path} is not a readable ONNX model: {e}") from None


def _input_shape(c: _Ctx, inp, input_shape) -> tuple[int, ...]:
    dims = [d.dim_value if d.HasField("dim_value") else None for d in inp.type.tensor_type.shape.dim]
    if input_shape is not None:
        return tuple(int(d) for d in input_shape)
    if len(dims) not in (2, 4) or any(d is None or d < 1 for d in dims[1:]):
        raise InteropError(f"input '{inp.name}' has shape {dims}; need static (N, C, H, W) or (N, F) "
                           "sizes, or pass input_shape=(H, W, C)")
    return (dims[2], dims[3], dims[1]) if len(dims) == 4 else (dims[1],)


def from_onnx(model, input_shape: tuple[int, ...] | None = None, name: str | None = None) -> Graph:
    """Convert a float ONNX model (ModelProto, file path or bytes) into a float IR graph.

    `input_shape` (NHWC per sample) is needed only when the model's input
    declares symbolic sizes beyond the batch. An op the IR cannot express
    raises InteropError naming the node and listing the supported ops.
    Node names outside the IR's rule are renamed (`builder.ir_name`); see
    `from_onnx_mapped` for the mapping back to the ONNX names.
    """
    return from_onnx_mapped(model, input_shape, name)[0]


def from_onnx_mapped(model, input_shape: tuple[int, ...] | None = None, name: str | None = None
                     ) -> tuple[Graph, dict[str, str]]:
    """`from_onnx`, plus `{IR node name: ONNX node name}` of every node that was renamed."""
    onnx = _onnx()
    mp = _load(onnx, model)
    try:
        return _convert(onnx, mp, input_shape, name)
    except InteropError:
        raise
    except MALFORMED as e:
        raise InteropError(f"the ONNX model is malformed ({type(e).__name__}: {str(e)[:200]}); "
                           "re-export it") from None


MALFORMED = (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError, MemoryError)
"""What onnx and numpy raise on a hostile or corrupt model (wrong attribute types, tensors whose
data disagrees with their dims, ...): each becomes an InteropError naming the node."""


def _convert(onnx, mp, input_shape, name: str | None) -> Graph:
    """`from_onnx` once the model is parsed; an unexpected error names the node it happened at."""
    consts = {t.name for t in mp.graph.initializer}
    inputs = [i for i in mp.graph.input if i.name not in consts]
    if len(inputs) != 1:
        raise InteropError(f"the model has {len(inputs)} inputs ({', '.join(i.name for i in inputs)}); "
                           "mcutrain models take one tensor")
    if len(mp.graph.output) != 1:
        raise InteropError(f"the model has {len(mp.graph.output)} outputs; mcutrain models return one "
                           "tensor of logits")
    b = GraphBuilder((1,), "onnx")  # replaced once the input shape is known
    c = _Ctx(onnx, mp, b)
    shape = _input_shape(c, inputs[0], input_shape)
    c.b = b = GraphBuilder(shape, name or mp.graph.name or "onnx")
    c.env[inputs[0].name] = b.input()
    for node in mp.graph.node:
        try:
            _convert_node(c, node)
        except InteropError:
            raise
        except MALFORMED as e:
            raise InteropError(f"{_where(node)}: cannot be converted ({type(e).__name__}: "
                               f"{str(e)[:200]})") from None
    out = mp.graph.output[0].name
    if out not in c.env:
        raise InteropError(f"the output '{out}' is not computed from the input")
    g = b.finish(c.env[out])
    return g, dict(b.source_names)


def _convert_node(c: _Ctx, node) -> None:
    """One ONNX node: a constant, an alias of one, or a supported op."""
    if node.domain not in ("", "ai.onnx"):
        raise InteropError(f"{_where(node)}: operator domain '{node.domain}' is not supported; "
                           "export with the standard ONNX operators")
    if node.op_type == "Constant":
        c.consts[node.output[0]] = _constant(c, node)
        return
    if node.op_type == "Identity" and node.input[0] in c.consts:  # torch exports these
        c.consts[node.output[0]] = c.consts[node.input[0]]
        return
    handler = HANDLERS.get(node.op_type)
    if handler is None:
        raise InteropError(f"{_where(node)} is not supported; supported ops: "
                           f"{', '.join(HANDLERS)}, Constant")
    c.env[node.output[0]] = handler(c, node)


def _constant(c: _Ctx, node) -> np.ndarray:
    a = c.attrs(node)
    if "value" in a:
        return c.nh.to_array(a["value"])
    for key in ("value_float", "value_floats", "value_int", "value_ints"):
        if key in a:
            return np.asarray(a[key])
    raise InteropError(f"{_where(node)}: only tensor and number constants are supported")
