"""int8 `QuantModel` -> `.tflite` flatbuffer that TensorFlow Lite Micro runs.

Why write the flatbuffer ourselves (with the `tflite` schema package's generated builders
on `flatbuffers`) rather than through TensorFlow's converter: the converter starts from a
float model and re-quantizes it; here the integers the simulator trained are the model, and
every one of them is written as it is. The mapping is `tflite_import`'s, inverted:
weights int8 OHWI (depthwise (1, kh, kw, C*M)) with their per-channel or per-tensor scales
and zero points 0, biases int32 with scale `float32((double)s_x * (double)s_w[c])`,
activations int8 per tensor. What the import recorded in `provenance["tflite"]` comes back:
the file's tensor names, float QUANTIZE/DEQUANTIZE edges, the SOFTMAX head, PADs folded into
convs, MEAN instead of an average pool, and the bias scales when they were not the product.
So an untrained imported model is written back with every tensor byte it had.

A model without that record (one made by mcutrain) is written with int8 input and output,
its convs' padding as SAME/VALID where it is one of them (else a PAD before a VALID conv), a
global average pool as an AVERAGE_POOL_2D over the whole map (exactly the IR's `single`
rounding; TFLM's MEAN rounds differently, and is what a `tflite`-rounding model's global pool
is written as), and a flatten as RESHAPE.

Example:
    >>> save_tflite(qm, "model.tflite")     # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import io
from mcutrain.graph import INPUT, Node
from mcutrain.interop.builder import InteropError, same_padding
from mcutrain.qmodel import QuantModel

CODES = {"ADD": 0, "AVERAGE_POOL_2D": 1, "CONV_2D": 3, "DEPTHWISE_CONV_2D": 4, "DEQUANTIZE": 6,
         "FULLY_CONNECTED": 9, "MAX_POOL_2D": 17, "RELU": 19, "RELU6": 21, "RESHAPE": 22, "SOFTMAX": 25,
         "PAD": 34, "MEAN": 40, "QUANTIZE": 114}
TYPES = {"float32": 0, "int32": 2, "int8": 9}
ACTS = {"none": 0, "relu": 1, "relu6": 3}
SCHEMA_VERSION = 3


def _schema():
    try:
        import flatbuffers
        import tflite
    except ImportError:
        raise ImportError("writing .tflite files needs the tflite schema package: pip install tflite") \
            from None
    return flatbuffers, tflite


class _Writer:
    """Collects tensors, buffers and operators, then serializes them in `finish`."""

    def __init__(self, qm: QuantModel):
        self.qm = qm
        self.meta: dict[str, Any] = dict(qm.provenance.get("tflite") or {})
        self.names: dict[str, str] = dict(qm.provenance.get("source_names") or {})
        self.tensors: list[dict[str, Any]] = []
        self.buffers: list[bytes] = [b""]
        self.ops: list[dict[str, Any]] = []
        self.of: dict[str, int] = {}          # IR tensor -> tensor index

    # -- tensors
    def tensor(self, name: str, shape: tuple[int, ...], dtype: str, scale=None, zp=None, qdim: int = 0,
               data: np.ndarray | None = None) -> int:
        buf = 0
        if data is not None:
            arr = np.ascontiguousarray(data, dtype=np.dtype(dtype).newbyteorder("<"))
            self.buffers.append(arr.tobytes())
            buf = len(self.buffers) - 1
        q = None
        if scale is not None:
            s = np.atleast_1d(np.asarray(scale, np.float32))
            z = np.atleast_1d(np.asarray(zp if zp is not None else 0, np.int64))
            q = (s, np.broadcast_to(z, s.shape).copy(), qdim)
        self.tensors.append({"name": name, "shape": tuple(int(d) for d in shape), "type": TYPES[dtype],
                             "buffer": buf, "q": q})
        return len(self.tensors) - 1

    def act(self, ir: str, name: str | None = None, shape: tuple[int, ...] | None = None) -> int:
        qp = self.qm.act_qparams[ir]
        shp = shape or (1, *self.qm.graph.shape(ir))
        i = self.tensor(name or self.names.get(ir, ir), shp, "int8", qp.scale, qp.zero_point)
        self.of[ir] = i
        return i

    def op(self, code: str, ins: list[int], outs: list[int], options: tuple[str, dict] | None = None) -> None:
        self.ops.append({"code": code, "ins": ins, "outs": outs, "options": options})

    # -- the walk
    def run(self) -> None:
        g, meta = self.qm.graph, self.meta
        inp = meta.get("input") or {}
        if len(g.input_shape) not in (1, 3):
            raise InteropError(f"input shape {g.input_shape} cannot be written (H, W, C or F)")
        x = self.act(INPUT, inp.get("name", "input"))
        graph_in = x
        if inp.get("float"):
            graph_in = self.tensor(inp.get("float_name", "input_float"), self.tensors[x]["shape"], "float32")
            self.op("QUANTIZE", [graph_in], [x])
        implicit = set(meta.get("implicit_flatten", []))
        for n in g.nodes:
            getattr(self, "node_" + n.op.value)(n, implicit)
        out = self.of[g.output]
        head = meta.get("output") or {}
        sm = head.get("softmax")
        if sm:
            k = g.num_classes
            y = self.tensor(sm["name"], tuple(sm.get("shape") or (1, k)), "int8", sm["scale"],
                            sm["zero_point"])
            self.op("SOFTMAX", [out], [y], ("SoftmaxOptions", {"Beta": float(sm["beta"])}))
            out = y
        dq = head.get("dequantize")
        if dq:
            y = self.tensor(dq["name"], tuple(dq.get("shape") or self.tensors[out]["shape"]), "float32")
            self.op("DEQUANTIZE", [out], [y])
            out = y
        self.io = ([graph_in], [out])

    def _weights(self, n: Node, w: np.ndarray, qdim: int, default: str) -> tuple[int, int]:
        qm = self.qm
        wq = qm.weight_qparams[n.name]
        cn = (self.meta.get("const_names") or {}).get(n.name) or [None, None]
        wi = self.tensor(cn[0] or f"{default}.weight", w.shape, "int8", wq.scale,
                         np.zeros(np.atleast_1d(wq.scale).shape, np.int64), qdim, w)
        b = qm.biases[n.name]
        if cn[1] is None and cn[0] is not None and not np.any(b):
            return wi, -1          # the file had no bias tensor: keep it that way
        sx = np.float64(qm.act_qparams[n.inputs[0]].scale)
        sw = np.broadcast_to(np.asarray(wq.scale, np.float64), b.shape)
        scales = (self.meta.get("bias_scales") or {}).get(n.name)
        bs = np.asarray(scales, np.float32) if scales is not None else (sx * sw).astype(np.float32)
        bi = self.tensor(cn[1] or f"{default}.bias", b.shape, "int32", bs, np.zeros(b.shape, np.int64), 0, b)
        return wi, bi

    def node_conv2d(self, n: Node, implicit: set[str]) -> None:
        qm, a = self.qm, n.attrs
        h, w, c = qm.graph.shape(n.inputs[0])
        kh, kw = a["kernel"]
        sh, sw = a["stride"]
        pad = tuple(a["padding"])
        x = self.of[n.inputs[0]]
        name = self.names.get(n.name, n.name)
        record = (self.meta.get("pads") or {}).get(n.name)
        mode, extra = "VALID", (0, 0, 0, 0)
        if record:
            extra = tuple(record["pad"])
            ph, pw = h + extra[0] + extra[1], w + extra[2] + extra[3]
            own = (0, 0, 0, 0) if record["padding"] == "VALID" else \
                (*same_padding(ph, kh, sh), *same_padding(pw, kw, sw))
            if tuple(e + o for e, o in zip(extra, own)) == pad:
                mode = record["padding"]
            else:
                record = None
        if not record:
            if pad == (0, 0, 0, 0):
                mode, extra = "VALID", (0, 0, 0, 0)
            elif pad == (*same_padding(h, kh, sh), *same_padding(w, kw, sw)):
                mode, extra = "SAME", (0, 0, 0, 0)
            else:
                mode, extra = "VALID", pad
        if any(extra):
            pname = record["name"] if record else f"{name}.padded"
            shp = (1, h + extra[0] + extra[1], w + extra[2] + extra[3], c)
            qp = qm.act_qparams[n.inputs[0]]
            y = self.tensor(pname, shp, "int8", qp.scale, qp.zero_point)
            pv = np.array([[0, 0], [extra[0], extra[1]], [extra[2], extra[3]], [0, 0]], np.int32)
            pi = self.tensor(record["paddings_name"] if record else f"{name}.paddings", (4, 2), "int32",
                             data=pv)
            self.op("PAD", [x, pi], [y])
            x = y
        wt = qm.weights[n.name]
        g = a["groups"]
        depthwise = (g == c and g > 1) or n.name in set(self.meta.get("depthwise", []))
        opts = {"Padding": 0 if mode == "SAME" else 1, "StrideH": sh, "StrideW": sw,
                "FusedActivationFunction": ACTS[n.act], "DilationHFactor": 1, "DilationWFactor": 1}
        if depthwise:
            wi, bi = self._weights(n, np.ascontiguousarray(wt.transpose(3, 1, 2, 0)), 3, name)
            opts["DepthMultiplier"] = wt.shape[0] // c
            self.op("DEPTHWISE_CONV_2D", [x, wi, bi], [self.act(n.name)], ("DepthwiseConv2DOptions", opts))
        elif g == 1:
            wi, bi = self._weights(n, wt, 0, name)
            self.op("CONV_2D", [x, wi, bi], [self.act(n.name)], ("Conv2DOptions", opts))
        else:
            raise InteropError(f"node '{n.name}': a grouped convolution ({g} groups of {c} channels) has no "
                               "TFLite operator; only groups 1 and depthwise export")

    def node_linear(self, n: Node, implicit: set[str]) -> None:
        x = self.of[n.inputs[0]]
        wi, bi = self._weights(n, self.qm.weights[n.name], 0, self.names.get(n.name, n.name))
        self.op("FULLY_CONNECTED", [x, wi, bi], [self.act(n.name)],
                ("FullyConnectedOptions", {"FusedActivationFunction": ACTS[n.act]}))

    def node_flatten(self, n: Node, implicit: set[str]) -> None:
        src = n.inputs[0]
        if n.name in implicit:       # TFLite's FULLY_CONNECTED / MEAN flattens by itself
            self.of[n.name] = self.of[src]
            return
        f = int(np.prod(self.qm.graph.shape(n.name)))
        name = self.names.get(n.name, n.name)
        shape_name = (self.meta.get("shape_names") or {}).get(n.name, f"{name}.shape")
        si = self.tensor(shape_name, (2,), "int32", data=np.array([1, f], np.int32))
        self.op("RESHAPE", [self.of[src], si], [self.act(n.name)], ("ReshapeOptions", {"NewShape": [1, f]}))

    def _pool(self, code: str, n: Node, kernel, stride, out_shape=None) -> None:
        opts = {"Padding": 1, "StrideH": stride[0], "StrideW": stride[1], "FilterHeight": kernel[0],
                "FilterWidth": kernel[1], "FusedActivationFunction": 0}
        self.op(code, [self.of[n.inputs[0]]], [self.act(n.name, shape=out_shape)], ("Pool2DOptions", opts))

    def node_maxpool(self, n: Node, implicit: set[str]) -> None:
        self._pool("MAX_POOL_2D", n, n.attrs["kernel"], n.attrs["stride"])

    def node_avgpool(self, n: Node, implicit: set[str]) -> None:
        self._pool("AVERAGE_POOL_2D", n, n.attrs["kernel"], n.attrs["stride"])

    def node_global_avgpool(self, n: Node, implicit: set[str]) -> None:
        h, w, c = self.qm.graph.shape(n.inputs[0])
        mean = (self.meta.get("mean") or {}).get(n.name)
        if not mean and getattr(self.qm, "rounding", "single") == "tflite":
            mean = {"keep_dims": True}   # in TFLite's rounding the IR's global pool is TFLM's MEAN
        if not mean:
            self._pool("AVERAGE_POOL_2D", n, (h, w), (h, w))
            return
        keep = bool(mean["keep_dims"])
        axis = np.asarray(mean.get("axis", [1, 2]), np.int32)
        ai = self.tensor(mean.get("axis_name", f"{n.name}.axis"), axis.shape, "int32", data=axis)
        y = self.act(n.name, shape=(1, 1, 1, c) if keep else (1, c))
        self.op("MEAN", [self.of[n.inputs[0]], ai], [y], ("ReducerOptions", {"KeepDims": keep}))

    def node_add(self, n: Node, implicit: set[str]) -> None:
        self.op("ADD", [self.of[t] for t in n.inputs], [self.act(n.name)],
                ("AddOptions", {"FusedActivationFunction": ACTS[n.act]}))

    def node_relu(self, n: Node, implicit: set[str]) -> None:
        self.op("RELU", [self.of[n.inputs[0]]], [self.act(n.name)])

    def node_relu6(self, n: Node, implicit: set[str]) -> None:
        self.op("RELU6", [self.of[n.inputs[0]]], [self.act(n.name)])

    def node_batchnorm(self, n: Node, implicit: set[str]) -> None:
        raise InteropError(f"node '{n.name}': fold BatchNorm before exporting")

    # -- serialization
    def finish(self) -> bytes:
        flatbuffers, tfl = _schema()
        b = flatbuffers.Builder(1024)

        def ivec(start, values, kind="Int32"):
            start(b, len(values))
            for v in reversed(values):
                getattr(b, "Prepend" + kind)(v)
            return b.EndVector()

        def raw(data: bytes) -> int:
            b.StartVector(1, len(data), 16)        # 16-byte aligned: TFLM reads int32 biases in place
            b.head = b.head - len(data)
            b.Bytes[b.head:b.head + len(data)] = data
            b.vectorNumElems = len(data)
            return b.EndVector()

        buffers = []
        for data in self.buffers:
            d = raw(data) if data else None
            tfl.BufferStart(b)
            if d is not None:
                tfl.BufferAddData(b, d)
            buffers.append(tfl.BufferEnd(b))
        tensors = []
        for t in self.tensors:
            name = b.CreateString(t["name"])
            shape = ivec(tfl.TensorStartShapeVector, list(t["shape"]))
            q = None
            if t["q"] is not None:
                s, z, qdim = t["q"]
                sv = ivec(tfl.QuantizationParametersStartScaleVector, [float(v) for v in s], "Float32")
                zv = ivec(tfl.QuantizationParametersStartZeroPointVector, [int(v) for v in z], "Int64")
                tfl.QuantizationParametersStart(b)
                tfl.QuantizationParametersAddScale(b, sv)
                tfl.QuantizationParametersAddZeroPoint(b, zv)
                tfl.QuantizationParametersAddQuantizedDimension(b, qdim)
                q = tfl.QuantizationParametersEnd(b)
            tfl.TensorStart(b)
            tfl.TensorAddShape(b, shape)
            tfl.TensorAddType(b, t["type"])
            tfl.TensorAddBuffer(b, t["buffer"])
            tfl.TensorAddName(b, name)
            if q is not None:
                tfl.TensorAddQuantization(b, q)
            tensors.append(tfl.TensorEnd(b))
        codes = sorted({o["code"] for o in self.ops}, key=lambda c: CODES[c])
        index = {c: i for i, c in enumerate(codes)}
        opcodes = []
        for c in codes:
            tfl.OperatorCodeStart(b)
            tfl.OperatorCodeAddDeprecatedBuiltinCode(b, min(CODES[c], 127))
            tfl.OperatorCodeAddBuiltinCode(b, CODES[c])
            tfl.OperatorCodeAddVersion(b, 1)
            opcodes.append(tfl.OperatorCodeEnd(b))
        ops = []
        for o in self.ops:
            opt, kind = None, 0
            if o["options"]:
                cls, fields = o["options"]
                vectors = {k: ivec(getattr(tfl, f"{cls}Start{k}Vector"), v) for k, v in fields.items()
                           if isinstance(v, list)}
                getattr(tfl, cls + "Start")(b)
                for k, v in fields.items():
                    getattr(tfl, f"{cls}Add{k}")(b, vectors.get(k, v))
                opt, kind = getattr(tfl, cls + "End")(b), getattr(tfl.BuiltinOptions, cls)
            ins = ivec(tfl.OperatorStartInputsVector, o["ins"])
            outs = ivec(tfl.OperatorStartOutputsVector, o["outs"])
            tfl.OperatorStart(b)
            tfl.OperatorAddOpcodeIndex(b, index[o["code"]])
            tfl.OperatorAddInputs(b, ins)
            tfl.OperatorAddOutputs(b, outs)
            if opt is not None:
                tfl.OperatorAddBuiltinOptionsType(b, kind)
                tfl.OperatorAddBuiltinOptions(b, opt)
            ops.append(tfl.OperatorEnd(b))

        def tables(start, items):
            start(b, len(items))
            for it in reversed(items):
                b.PrependUOffsetTRelative(it)
            return b.EndVector()

        tv = tables(tfl.SubGraphStartTensorsVector, tensors)
        ov = tables(tfl.SubGraphStartOperatorsVector, ops)
        iv = ivec(tfl.SubGraphStartInputsVector, self.io[0])
        outv = ivec(tfl.SubGraphStartOutputsVector, self.io[1])
        sg_name = b.CreateString(self.meta.get("graph_name") or self.qm.graph.name)
        tfl.SubGraphStart(b)
        tfl.SubGraphAddTensors(b, tv)
        tfl.SubGraphAddOperators(b, ov)
        tfl.SubGraphAddInputs(b, iv)
        tfl.SubGraphAddOutputs(b, outv)
        tfl.SubGraphAddName(b, sg_name)
        sg = tfl.SubGraphEnd(b)
        cv = tables(tfl.ModelStartOperatorCodesVector, opcodes)
        sv = tables(tfl.ModelStartSubgraphsVector, [sg])
        bv = tables(tfl.ModelStartBuffersVector, buffers)
        desc = b.CreateString(self.meta.get("description") or "mcutrain int8 model")
        tfl.ModelStart(b)
        tfl.ModelAddVersion(b, SCHEMA_VERSION)
        tfl.ModelAddOperatorCodes(b, cv)
        tfl.ModelAddSubgraphs(b, sv)
        tfl.ModelAddDescription(b, desc)
        tfl.ModelAddBuffers(b, bv)
        b.Finish(tfl.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())


def to_tflite(qm: QuantModel) -> bytes:
    """The .tflite bytes of an int8 model (see the module docstring for the mapping)."""
    return to_tflite_mapped(qm)[0]


def to_tflite_mapped(qm: QuantModel) -> tuple[bytes, dict[str, int]]:
    """`to_tflite`, plus `{IR tensor: index of its tensor in the file's subgraph}`.

    Why: a layer-by-layer comparison with TFLM reads each layer's output by tensor index. A
    flatten that TFLite does implicitly (inside FULLY_CONNECTED or MEAN) maps to its input's
    tensor, which holds the same bytes.
    """
    if not isinstance(qm, QuantModel):
        raise InteropError("a .tflite export needs an int8 model (QuantModel); quantize the float graph "
                           "first (mcutrain pretrain, or import --calibrate)")
    w = _Writer(qm)
    w.run()
    return w.finish(), dict(w.of)


def save_tflite(qm: QuantModel, path: str | Path) -> Path:
    """`to_tflite`, written atomically."""
    data = to_tflite(qm)
    path = Path(path)
    io.atomic_write_bytes(path, lambda f: f.write(data))
    return path
