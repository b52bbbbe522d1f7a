"""`.tflite` -> int8 `QuantModel`: the model exactly as deployed, its integers kept.

Why keep the file's integers instead of re-quantizing a float graph: the user's model is
already int8 on the device; PTQ would give different weights and so a different model.
Each TFLite tensor maps onto mcutrain's int8 format one to one (docs/interop.md, "TensorFlow
Lite"): activations int8 per tensor `(s, z)`; weights int8 symmetric, per output channel or
per tensor; biases int32 at scale `s_x * s_w[c]`. The requantization constants are derived
from those scales as TFLite does (`QuantizeMultiplier` of `(double)s_x * (double)s_w[c] /
(double)s_y`, which is `quant.fixedpoint.output_multiplier`), so nothing else is stored.

Layout needs no transposes: TFLite is NHWC with OHWI conv weights, like the IR; depthwise
weights (1, kh, kw, C*M) become OHWI (C*M, kh, kw, 1) with groups = C (output channel
o = c*M + m reads input channel c, the IR's rule). What the IR does not hold -- the float
QUANTIZE/DEQUANTIZE edges, the SOFTMAX head, a PAD folded into a conv, MEAN versus an
average pool, the file's tensor names -- goes into `provenance["tflite"]`, from which
`tflite_export` writes the same file back. The float graph of the QuantModel holds the
dequantized weights (what PTQ would have started from), so float tools still work.

Example:
    >>> qm, renamed = from_tflite("model.tflite")     # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import graph as G
from mcutrain.graph import INPUT, NAME_MAX, Graph, GraphError, Node, Op
from mcutrain.interop import tflite_read as R
from mcutrain.interop.builder import InteropError, ir_name, same_padding
from mcutrain.interop.tflite_ops import ShapeOps
from mcutrain.qmodel import QuantModel
from mcutrain.quant.qparams import QParams

SUPPORTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D", "AVERAGE_POOL_2D",
             "MEAN", "ADD", "RESHAPE", "PAD", "RELU", "RELU6", "QUANTIZE", "DEQUANTIZE", "SOFTMAX")
ROUNDING = "tflite"
"""The rounding mode of every imported model: TFLite's double rounding (docs/integer-semantics.md)."""


def _ref(where: str, t: R.Tensor) -> str:
    return f"{where}, tensor '{t.name[:64]}'"


class _Importer(ShapeOps):
    """Walks the operators in file order (TFLite stores them topologically) and emits IR nodes."""

    def __init__(self, m: R.Model):
        self.m = m
        self.nodes: list[Node] = []
        self.acts: dict[str, QParams] = {}
        self.weights: dict[str, np.ndarray] = {}
        self.wq: dict[str, QParams] = {}
        self.biases: dict[str, np.ndarray] = {}
        self.ir: dict[int, str] = {}                # tensor index -> IR tensor
        self.pads: dict[int, tuple[R.Operator, str, tuple[int, int, int, int]]] = {}
        self.names = {INPUT}
        self.renamed: dict[str, str] = {}
        self.meta: dict[str, Any] = {"implicit_flatten": [], "mean": {}, "pads": {}, "depthwise": [],
                                     "bias_scales": {}, "const_names": {}, "graph_name": m.name,
                                     "description": m.description}
        self.consumers: dict[int, list[int]] = {}
        for op in m.operators:
            for t in op.inputs:
                if t >= 0:
                    self.consumers.setdefault(t, []).append(op.index)

    # -- helpers
    def t(self, i: int) -> R.Tensor:
        return self.m.tensors[i]

    def unique(self, name: str) -> str:
        base = ir_name(name)
        out, i = base, 1
        while out in self.names:
            suffix = f"_{i}"
            out, i = base[:NAME_MAX - len(suffix)] + suffix, i + 1
        self.names.add(out)
        if out != name:
            self.renamed[out] = name
        return out

    def act_qp(self, where: str, t: R.Tensor) -> QParams:
        if t.dtype != "int8" or t.scale is None or not t.per_tensor:
            raise InteropError(f"{_ref(where, t)}: activations must be int8 with one scale and zero "
                               f"point (got {t.dtype}, {0 if t.scale is None else t.scale.size} scales)")
        return QParams(np.float32(t.scale[0]), np.int32(t.zero_point[0]))

    def value(self, op: R.Operator, k: int) -> str:
        """IR tensor of the operator's k-th input (a produced activation, not a constant)."""
        i = op.inputs[k] if k < len(op.inputs) else -1
        if i < 0 or i not in self.ir:
            what = "a constant" if i >= 0 and self.t(i).data is not None else "not produced yet"
            raise InteropError(f"{op.where}: input {k} is {what}; only activations produced by earlier "
                               "operators (or the model input) are supported there")
        return self.ir[i]

    def const(self, op: R.Operator, k: int, dtype: str, what: str) -> R.Tensor:
        i = op.inputs[k] if k < len(op.inputs) else -1
        if i < 0 or self.t(i).data is None:
            raise InteropError(f"{op.where}: the {what} (input {k}) must be a constant tensor")
        t = self.t(i)
        if t.dtype != dtype:
            raise InteropError(f"{_ref(op.where, t)}: the {what} must be {dtype}, got {t.dtype}")
        return t

    def emit(self, node: Node, out: R.Tensor, qp: QParams) -> None:
        self.nodes.append(node)
        self.acts[node.name] = qp
        self.ir[out.index] = node.name

    def same_qparams(self, op: R.Operator, x: str, out: R.Tensor) -> QParams:
        qp = self.act_qp(op.where, out)
        if qp != self.acts[x]:
            raise InteropError(f"{op.where}: input and output quantization differ ({self.acts[x]!r} vs "
                               f"{qp!r}); mcutrain's {op.name.lower()} keeps its input's scale and zero "
                               "point")
        return qp

    @staticmethod
    def act(op: R.Operator) -> str:
        a = op.options.get("act", "none")
        if a not in ("none", "relu", "relu6"):
            raise InteropError(f"{op.where}: fused activation {a.upper()} is not supported (NONE, RELU, "
                               "RELU6)")
        return a

    def shape_of(self, x: str) -> tuple[int, ...]:
        try:
            return Graph(self.input_shape, self.nodes, "m").shapes[x] if x != INPUT else self.input_shape
        except GraphError as e:
            raise InteropError(str(e)) from None

    # -- the walk
    def run(self) -> tuple[QuantModel, dict[str, str]]:
        m = self.m
        if len(m.inputs) != 1 or len(m.outputs) != 1:
            raise InteropError(f"the model has {len(m.inputs)} inputs and {len(m.outputs)} outputs; one "
                               "of each is supported")
        self.start_input()
        tail = self.head()
        for op in m.operators:
            if op.index in tail or op.index == self.meta["input"].get("quantize_op"):
                continue
            if op.name not in SUPPORTED:
                raise InteropError(f"{op.where} is not supported; supported operators: "
                                   f"{', '.join(SUPPORTED)}")
            if len(op.outputs) != 1:
                raise InteropError(f"{op.where}: has {len(op.outputs)} outputs, one is supported")
            getattr(self, "op_" + op.name.lower())(op)
        if self.pads:
            op = next(iter(self.pads.values()))[0]
            raise InteropError(f"{op.where}: a PAD is supported only right before one CONV_2D or "
                               "DEPTHWISE_CONV_2D (folded into its padding)")
        logits = self.meta["output"]["logits"]
        if logits not in self.ir:
            raise InteropError("the model's output is not computed by the supported operators")
        return self.finish(self.ir[logits])

    def start_input(self) -> None:
        t = self.t(self.m.inputs[0])
        entry: dict[str, Any] = {"name": t.name, "float": False}
        if t.dtype == "float32":
            users = self.consumers.get(t.index, [])
            ops = [self.m.operators[i] for i in users]
            if len(ops) != 1 or ops[0].name != "QUANTIZE":
                raise InteropError(f"the float input '{t.name[:64]}' must feed exactly one QUANTIZE "
                                   "(mcutrain runs int8 models)")
            q = ops[0]
            entry.update({"float": True, "float_name": t.name, "quantize_op": q.index})
            t = self.t(q.outputs[0])
            entry["name"] = t.name
        qp = self.act_qp("the model input", t)
        shape = t.shape
        if len(shape) not in (2, 4) or shape[0] != 1:
            raise InteropError(f"input '{t.name[:64]}' has shape {shape}; (1, H, W, C) or (1, F) is "
                               "supported (batch 1, as TFLM runs)")
        self.input_shape = shape[1:]
        if int(np.prod(self.input_shape)) > R.MAX_TENSOR_ELEMENTS:
            raise InteropError(f"input shape {self.input_shape} is above the size limit")
        self.acts[INPUT] = qp
        self.ir[t.index] = INPUT
        self.meta["input"] = entry

    def head(self) -> set[int]:
        """The output edge: [SOFTMAX] [DEQUANTIZE] after the logits, recorded and left out of the IR."""
        producer = {o: op for op in self.m.operators for o in op.outputs}
        t = self.t(self.m.outputs[0])
        out: dict[str, Any] = {"softmax": None, "dequantize": None}
        skip: set[int] = set()
        op = producer.get(t.index)
        if op is not None and op.name == "DEQUANTIZE":
            out["dequantize"] = {"name": t.name, "shape": list(t.shape)}
            skip.add(op.index)
            t = self.t(op.inputs[0])
            op = producer.get(t.index)
        if op is not None and op.name == "SOFTMAX":
            beta = op.options.get("beta", 1.0)
            if not np.isfinite(beta) or beta <= 0:
                raise InteropError(f"{op.where}: beta must be finite and > 0, got {beta}")
            qp = self.act_qp(op.where, t)
            out["softmax"] = {"name": t.name, "scale": float(qp.scale), "zero_point": int(qp.zero_point),
                              "beta": float(beta), "shape": list(t.shape)}
            skip.add(op.index)
            t = self.t(op.inputs[0])
        for name in ("SOFTMAX", "DEQUANTIZE"):
            for o in self.m.operators:
                if o.name == name and o.index not in skip:
                    raise InteropError(f"{o.where}: {name} is supported only as the model's last "
                                       "operator (the output head)")
        out["logits"] = t.index
        self.meta["output"] = out
        return skip

    # -- operators
    def op_quantize(self, op: R.Operator) -> None:
        raise InteropError(f"{op.where}: QUANTIZE is supported only on the float model input")

    def _conv_padding(self, op: R.Operator, x: str, kh: int, kw: int) -> tuple[str, tuple[int, ...]]:
        """(IR input, (top, bottom, left, right)) with a PAD before the conv folded in."""
        extra = (0, 0, 0, 0)
        src = op.inputs[0]
        if src in self.pads:
            pad_op, x, extra = self.pads.pop(src)
            self.meta["pads"][op.outputs[0]] = {"name": self.t(src).name, "pad": list(extra),
                                                "paddings_name": self.t(pad_op.inputs[1]).name,
                                                "padding": op.options["padding"]}
        h, w = self.shape_of(x)[:2]
        h, w = h + extra[0] + extra[1], w + extra[2] + extra[3]
        sh, sw = op.options["stride"]
        if op.options["padding"] == "SAME":
            (pt, pb), (pl, pr) = same_padding(h, kh, sh), same_padding(w, kw, sw)
        elif op.options["padding"] == "VALID":
            pt = pb = pl = pr = 0
        else:
            raise InteropError(f"{op.where}: unknown padding {op.options['padding']}")
        return x, (pt + extra[0], pb + extra[1], pl + extra[2], pr + extra[3])

    def _bias(self, op: R.Operator, o: int, sx: np.float32, sw: np.ndarray) -> np.ndarray:
        i = op.inputs[2] if len(op.inputs) > 2 else -1
        if i < 0:
            return np.zeros(o, np.int32)
        t = self.const(op, 2, "int32", "bias")
        if t.shape != (o,):
            raise InteropError(f"{_ref(op.where, t)}: bias shape {t.shape}, expected ({o},)")
        want = np.float64(sx) * np.broadcast_to(sw.astype(np.float64), (o,))
        if t.scale is not None:
            got = np.broadcast_to(t.scale.astype(np.float64), (o,))
            if np.any(np.abs(got - want) > 1e-6 * np.minimum(got, want)):
                raise InteropError(f"{_ref(op.where, t)}: bias scales are not input scale x weight "
                                   "scale; the int32 bias would mean another value")
            if np.any(t.scale != want.astype(np.float32)):
                self.meta["bias_scales"][op.outputs[0]] = [float(v) for v in t.scale]
        return np.ascontiguousarray(t.data, np.int32)

    def _weights(self, op: R.Operator, t: R.Tensor, o: int, qdim: int) -> QParams:
        if t.scale is None:
            raise InteropError(f"{_ref(op.where, t)}: weights must be quantized (int8 with scales)")
        if np.any(t.zero_point != 0):
            raise InteropError(f"{_ref(op.where, t)}: weights must be symmetric (zero points 0)")
        if t.per_tensor:
            return QParams(np.float32(t.scale[0]), np.int32(0))
        if t.qdim != qdim or t.scale.size != o:
            raise InteropError(f"{_ref(op.where, t)}: per-channel scales must run along the output "
                               f"channels (dimension {qdim}, {o} of them)")
        return QParams(t.scale.astype(np.float32), np.zeros(o, np.int32))

    def _parametric(self, op: R.Operator, kind: str, x: str, w_ohwi: np.ndarray, wq: QParams,
                    b: np.ndarray, **conv: Any) -> None:
        out = self.t(op.outputs[0])
        name = self.unique(out.name)
        qp = self.act_qp(op.where, out)
        sx = self.acts[x].scale
        sw = np.broadcast_to(wq.scale, (w_ohwi.shape[0],)).astype(np.float32)
        wf = (w_ohwi.astype(np.float32) * sw.reshape(-1, *([1] * (w_ohwi.ndim - 1))))
        bf = (b.astype(np.float64) * (np.float64(sx) * sw.astype(np.float64))).astype(np.float32)
        act = self.act(op)
        if kind == "linear":
            node = G.linear(name, x, w_ohwi.shape[0], act, weight=wf, bias=bf)
        else:
            node = G.conv2d(name, x, w_ohwi.shape[0], w_ohwi.shape[1:3], act=act, weight=wf, bias=bf, **conv)
        self.weights[name] = np.ascontiguousarray(w_ohwi, np.int8)
        self.wq[name] = wq
        self.biases[name] = b
        self.meta["const_names"][name] = [self.t(op.inputs[1]).name,
                                          self.t(op.inputs[2]).name if len(op.inputs) > 2 and
                                          op.inputs[2] >= 0 else None]
        self.emit(node, out, qp)
        self._rekey(op.outputs[0], name)

    def _rekey(self, tensor: int, name: str) -> None:
        """Per-node records were keyed by the output tensor index until the node had a name."""
        for key in ("pads", "bias_scales"):
            if tensor in self.meta[key]:
                self.meta[key][name] = self.meta[key].pop(tensor)

    def _check_conv(self, op: R.Operator) -> None:
        if tuple(op.options["dilation"]) != (1, 1):
            raise InteropError(f"{op.where}: dilation {op.options['dilation']} is not supported (1 only)")
        if min(op.options["stride"]) < 1:
            raise InteropError(f"{op.where}: strides must be >= 1, got {op.options['stride']}")

    def op_conv_2d(self, op: R.Operator) -> None:
        self._check_conv(op)
        t = self.const(op, 1, "int8", "weight")
        x0 = self.value(op, 0) if op.inputs[0] not in self.pads else self.pads[op.inputs[0]][1]
        cin = self.shape_of(x0)[-1]
        if len(t.shape) != 4 or t.shape[3] != cin:
            raise InteropError(f"{_ref(op.where, t)}: weight shape {t.shape} does not fit an input with "
                               f"{cin} channels (OHWI)")
        x, pad = self._conv_padding(op, x0, t.shape[1], t.shape[2])
        wq = self._weights(op, t, t.shape[0], 0)
        b = self._bias(op, t.shape[0], self.acts[x].scale, np.asarray(wq.scale))
        self._parametric(op, "conv", x, t.data, wq, b, stride=op.options["stride"], padding=pad)

    def op_depthwise_conv_2d(self, op: R.Operator) -> None:
        self._check_conv(op)
        t = self.const(op, 1, "int8", "weight")
        x0 = self.value(op, 0) if op.inputs[0] not in self.pads else self.pads[op.inputs[0]][1]
        cin = self.shape_of(x0)[-1]
        if len(t.shape) != 4 or t.shape[0] != 1 or t.shape[3] % cin:
            raise InteropError(f"{_ref(op.where, t)}: depthwise weight shape {t.shape} must be (1, kh, "
                               f"kw, C*M) for an input with {cin} channels")
        mult = t.shape[3] // cin
        if op.options["depth_multiplier"] not in (0, mult):
            raise InteropError(f"{op.where}: depth_multiplier {op.options['depth_multiplier']} does not "
                               f"match the weights ({t.shape[3]} channels for {cin} inputs)")
        x, pad = self._conv_padding(op, x0, t.shape[1], t.shape[2])
        o = t.shape[3]
        wq = self._weights(op, t, o, 3)
        b = self._bias(op, o, self.acts[x].scale, np.asarray(wq.scale))
        w = np.ascontiguousarray(t.data.transpose(3, 1, 2, 0))
        self._parametric(op, "conv", x, w, wq, b, stride=op.options["stride"], padding=pad, groups=cin)
        if cin == 1:
            self.meta["depthwise"].append(self.nodes[-1].name)

    def op_fully_connected(self, op: R.Operator) -> None:
        if op.options["weights_format"] != 0 or op.options["keep_num_dims"]:
            raise InteropError(f"{op.where}: only the DEFAULT weights format without keep_num_dims is "
                               "supported")
        x = self.value(op, 0)
        t = self.const(op, 1, "int8", "weight")
        shape = self.shape_of(x)
        if len(shape) == 3:           # TFLite flattens an (H, W, C) input implicitly
            name = self.unique(self.t(op.inputs[0]).name + ".flat")
            self.nodes.append(G.flatten(name, x))
            self.acts[name] = self.acts[x]
            self.meta["implicit_flatten"].append(name)
            x, shape = name, (int(np.prod(shape)),)
        if len(t.shape) != 2 or t.shape[1] != shape[0]:
            raise InteropError(f"{_ref(op.where, t)}: weight shape {t.shape} does not fit an input of "
                               f"{shape[0]} features")
        out = self.t(op.outputs[0])
        if out.shape not in ((1, t.shape[0]), (t.shape[0],)):
            raise InteropError(f"{_ref(op.where, out)}: output shape {out.shape}, expected (1, {t.shape[0]})")
        wq = self._weights(op, t, t.shape[0], 0)
        b = self._bias(op, t.shape[0], self.acts[x].scale, np.asarray(wq.scale))
        self._parametric(op, "linear", x, t.data, wq, b)

    def op_softmax(self, op: R.Operator) -> None:      # head() consumed the last one
        raise InteropError(f"{op.where}: SOFTMAX is supported only as the model's last operator")

    op_dequantize = op_softmax

    def finish(self, out: str) -> tuple[QuantModel, dict[str, str]]:
        nodes = self.nodes
        keep = {out}
        for n in reversed(nodes):      # drop what the output does not depend on
            if n.name in keep:
                keep.update(n.inputs)
        nodes = [n for n in nodes if n.name in keep]
        if not nodes or nodes[-1].name != out:
            raise InteropError("the model's output must be the last computed tensor")
        try:
            g = Graph(self.input_shape, nodes, ir_name(self.m.name) if self.m.name else "tflite_model")
            if len(g.output_shape) != 1 and g.output_shape[:2] != (1, 1):
                raise InteropError(f"the output (before any SOFTMAX) has shape {g.output_shape}; logits "
                                   "must be a flat vector or a 1x1 map")
            acts = {k: v for k, v in self.acts.items() if k == INPUT or k in keep}
            names = {n.name for n in nodes if n.op in (Op.CONV2D, Op.LINEAR)}
            qm = QuantModel(g, acts, {k: self.weights[k] for k in names},
                            {k: self.wq[k] for k in names}, {k: self.biases[k] for k in names},
                            rounding=ROUNDING)
            for n in nodes:            # every multiplier TFLite would derive must be representable
                if n.op in (Op.CONV2D, Op.LINEAR):
                    qm.requant_params(n)
                elif n.op == Op.ADD:
                    qm.add_params(n)
        except (GraphError, ValueError) as e:
            raise InteropError(f"the imported model is not valid: {e}") from None
        self.meta["output"]["logits"] = out
        for key in ("implicit_flatten", "depthwise"):
            self.meta[key] = [k for k in self.meta[key] if k in keep]
        renamed = {k: v for k, v in self.renamed.items() if k in keep}
        qm.provenance = {"tflite": self.meta, **({"source_names": renamed} if renamed else {})}
        return qm, renamed


def from_tflite_bytes(data: bytes, source: str = "model.tflite") -> tuple[QuantModel, dict[str, str]]:
    """(int8 QuantModel, {IR name: file tensor name} of renamed tensors) from .tflite bytes."""
    return _Importer(R.parse(data, source)).run()


def from_tflite(path: str | Path) -> tuple[QuantModel, dict[str, str]]:
    """(int8 QuantModel, {IR name: file tensor name}) from a .tflite file; refusals are InteropErrors.

    The QuantModel's provenance holds `tflite` (what `tflite_export.to_tflite` restores) and
    the file name under `imported_from`.
    """
    qm, renamed = _Importer(R.read(path)).run()
    qm.provenance = {"imported_from": {"tflite": Path(path).name}, **qm.provenance}
    return qm, renamed


def is_tflite(path: str | Path) -> bool:
    """True when the file carries the TFLite flatbuffer identifier (or, unreadable, a .tflite suffix)."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            head = f.read(8)
        return head[4:8] == R.IDENTIFIER
    except OSError:
        return p.suffix.lower() == ".tflite"
