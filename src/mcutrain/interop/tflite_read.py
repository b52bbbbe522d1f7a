"""Read a `.tflite` flatbuffer into plain, validated Python records (no TensorFlow).

Why the `tflite` package: it is the official TensorFlow Lite schema (`schema.fbs`)
compiled by `flatc` into Python classes, kept in step with TensorFlow's releases, on top
of Google's `flatbuffers` runtime; it needs neither TensorFlow nor a C++ build, and it
reads the file in place (no copy, no pickle). Everything above this module works on the
records defined here, so the rest of the importer never touches flatbuffer offsets.

The file is untrusted input (docs/security.md): its size is bounded before parsing, a
flatbuffer with offsets outside the file is refused as "not a valid .tflite file", and
every number the importer relies on is checked here or where it is used: shapes (1 to
`MAX_DIM` per dimension), tensor sizes (`MAX_TENSOR_ELEMENTS`), buffer sizes against the
declared shape and type, scales (finite, > 0, float32) and zero points (in the type's range).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.interop.builder import InteropError
from mcutrain.limits import MAX_DIM, MAX_NODES, MAX_PARAMS, MAX_TENSOR_ELEMENTS

MAX_FILE_BYTES = 8 * MAX_PARAMS
"""Largest .tflite read: room for `MAX_PARAMS` int8 weights with their int32 biases and headers."""
MAX_TENSORS = 4 * MAX_NODES
IDENTIFIER = b"TFL3"

DTYPES = {0: ("float32", np.float32), 2: ("int32", np.int32), 3: ("uint8", np.uint8),
          4: ("int64", np.int64), 7: ("int16", np.int16), 9: ("int8", np.int8)}
"""TensorType codes the importer can hold; any other type is named in the refusal."""
TYPE_NAMES = {1: "float16", 5: "string", 6: "bool", 8: "complex64", 10: "float64", 11: "complex128",
              12: "uint64", 13: "resource", 14: "variant", 15: "uint32", 16: "uint16", 17: "int4",
              18: "bfloat16"}
ACTIVATIONS = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6", 4: "tanh", 5: "sign_bit"}
PADDINGS = {0: "SAME", 1: "VALID"}


@dataclass
class Tensor:
    """One tensor of the subgraph: shape with the batch, type, qparams and constant data."""

    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    scale: np.ndarray | None = None          # float32 (k,), None when not quantized
    zero_point: np.ndarray | None = None     # int64 (k,)
    qdim: int = 0
    data: np.ndarray | None = None           # constant tensors only, typed and shaped

    @property
    def per_tensor(self) -> bool:
        return self.scale is not None and self.scale.size == 1


@dataclass
class Operator:
    """One operator: builtin name, tensor indices (-1 = absent optional input), its options."""

    index: int
    name: str
    inputs: list[int]
    outputs: list[int]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"operator {self.index} ({self.name})"


@dataclass
class Model:
    name: str
    description: str
    tensors: list[Tensor]
    operators: list[Operator]
    inputs: list[int]
    outputs: list[int]


def _schema():
    try:
        import tflite
        from tflite.utils import BUILTIN_OPCODE2NAME
    except ImportError:
        raise ImportError("reading .tflite files needs the tflite schema package: pip install tflite") \
            from None
    return tflite, BUILTIN_OPCODE2NAME


def _options(tfl, op, name: str) -> dict[str, Any]:
    """The builtin options the importer uses, as plain values (absent table: the schema defaults)."""
    table = op.BuiltinOptions()
    kinds = {"CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
             "FULLY_CONNECTED": "FullyConnectedOptions", "MAX_POOL_2D": "Pool2DOptions",
             "AVERAGE_POOL_2D": "Pool2DOptions", "ADD": "AddOptions", "MEAN": "ReducerOptions",
             "RESHAPE": "ReshapeOptions", "SOFTMAX": "SoftmaxOptions"}
    if name not in kinds:
        return {}
    o = getattr(tfl, kinds[name])()
    if table is not None:
        o.Init(table.Bytes, table.Pos)
    elif name in ("RESHAPE", "SOFTMAX", "MEAN"):
        return {"new_shape": None} if name == "RESHAPE" else ({"beta": 1.0} if name == "SOFTMAX"
                                                              else {"keep_dims": False})
    else:      # a table with every field at its default (the builder omits default fields)
        o = None
    act = lambda: ACTIVATIONS.get(o.FusedActivationFunction(), "unknown") if o else "none"
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        d = {"padding": PADDINGS.get(o.Padding() if o else 0, "unknown"),
             "stride": (o.StrideH(), o.StrideW()) if o else (0, 0),
             "dilation": (o.DilationHFactor(), o.DilationWFactor()) if o else (1, 1), "act": act()}
        if name == "DEPTHWISE_CONV_2D":
            d["depth_multiplier"] = o.DepthMultiplier() if o else 0
        return d
    if name == "FULLY_CONNECTED":
        return {"act": act(), "weights_format": o.WeightsFormat() if o else 0,
                "keep_num_dims": bool(o.KeepNumDims()) if o else False}
    if name in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
        return {"padding": PADDINGS.get(o.Padding() if o else 0, "unknown"),
                "stride": (o.StrideH(), o.StrideW()) if o else (0, 0),
                "filter": (o.FilterHeight(), o.FilterWidth()) if o else (0, 0), "act": act()}
    if name == "ADD":
        return {"act": act()}
    if name == "MEAN":
        return {"keep_dims": bool(o.KeepDims()) if o else False}
    if name == "RESHAPE":
        return {"new_shape": tuple(int(v) for v in o.NewShapeAsNumpy()) if o and o.NewShapeLength()
                else None}
    return {"beta": float(o.Beta()) if o else 1.0}


def _tensor(tfl, model, t, index: int) -> Tensor:
    name = t.Name().decode("utf-8", "replace") if t.Name() else f"tensor_{index}"
    where = f"tensor {index} ('{name[:64]}')"
    code = t.Type()
    if code not in DTYPES:
        raise InteropError(f"{where}: type {TYPE_NAMES.get(code, code)} is not supported "
                           "(int8 models only, with int32 biases)")
    dtype, np_dtype = DTYPES[code]
    shape = tuple(int(v) for v in t.ShapeAsNumpy()) if t.ShapeLength() else ()
    if len(shape) > 4 or any(d < 1 or d > MAX_DIM for d in shape):
        raise InteropError(f"{where}: shape {shape} is not supported (at most 4 dimensions, each "
                           f"1..{MAX_DIM})")
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if size > MAX_TENSOR_ELEMENTS:
        raise InteropError(f"{where}: {size:,} elements, more than the limit {MAX_TENSOR_ELEMENTS:,}")
    out = Tensor(index, name, shape, dtype)
    q = t.Quantization()
    if q is not None and q.ScaleLength():
        scale = q.ScaleAsNumpy().astype(np.float32)
        zp = q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength() else np.zeros(0, np.int64)
        if zp.size != scale.size:
            raise InteropError(f"{where}: {scale.size} scales but {zp.size} zero points")
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise InteropError(f"{where}: quantization scales must be finite and > 0, got "
                               f"{scale[:8].tolist()}")
        lo, hi = {"int8": (-128, 127), "uint8": (0, 255), "int16": (0, 0)}.get(dtype, (0, 0))
        if np.any(zp < lo) or np.any(zp > hi):
            raise InteropError(f"{where}: zero points {zp[:8].tolist()} outside [{lo}, {hi}] for {dtype}")
        qdim = int(q.QuantizedDimension())
        if scale.size > 1 and not (0 <= qdim < len(shape) and shape[qdim] == scale.size):
            raise InteropError(f"{where}: {scale.size} per-channel scales do not match dimension {qdim} "
                               f"of shape {shape}")
        out.scale, out.zero_point, out.qdim = scale, zp, qdim
    buf_index = t.Buffer()
    if not 0 <= buf_index < model.BuffersLength():
        raise InteropError(f"{where}: buffer index {buf_index} outside the file's "
                           f"{model.BuffersLength()} buffers")
    buf = model.Buffers(buf_index)
    if buf.Offset() > 1 or buf.Size() > 0:
        raise InteropError(f"{where}: data stored outside the flatbuffer (a > 2 GB model) is not "
                           "supported")
    if buf.DataLength():
        raw = buf.DataAsNumpy()
        want = size * np.dtype(np_dtype).itemsize
        if raw.size != want:
            raise InteropError(f"{where}: buffer holds {raw.size} bytes, shape {shape} of {dtype} "
                               f"needs {want}")
        out.data = np.frombuffer(raw.tobytes(), dtype=np.dtype(np_dtype).newbyteorder("<")) \
            .astype(np_dtype).reshape(shape)
    return out


def parse(data: bytes, source: str = "model") -> Model:
    """The records of a .tflite file's only subgraph; a malformed file is an `InteropError`."""
    if len(data) > MAX_FILE_BYTES:
        raise InteropError(f"'{source}' has {len(data):,} bytes, more than the limit {MAX_FILE_BYTES:,}")
    if len(data) < 8 or data[4:8] != IDENTIFIER:
        raise InteropError(f"'{source}' is not a .tflite file (no 'TFL3' flatbuffer identifier)")
    tfl, opnames = _schema()
    try:
        return _parse(tfl, opnames, data)
    except InteropError:
        raise
    except Exception as e:      # offsets outside the buffer, bad unions: the file is corrupt
        raise InteropError(f"'{source}' is not a valid .tflite file ({type(e).__name__}: {e}); "
                           "re-export it from the converter") from None


def _parse(tfl, opnames: dict[int, str], data: bytes) -> Model:
    model = tfl.Model.GetRootAs(data, 0)
    if model.SubgraphsLength() != 1:
        raise InteropError(f"the file has {model.SubgraphsLength()} subgraphs; one is supported "
                           "(no control flow, no signatures with several graphs)")
    sg = model.Subgraphs(0)
    if sg.TensorsLength() > MAX_TENSORS or sg.OperatorsLength() > MAX_NODES:
        raise InteropError(f"the graph has {sg.TensorsLength()} tensors and {sg.OperatorsLength()} "
                           f"operators; the limits are {MAX_TENSORS} and {MAX_NODES}")
    tensors = [_tensor(tfl, model, sg.Tensors(i), i) for i in range(sg.TensorsLength())]
    n = len(tensors)
    codes = []
    for i in range(model.OperatorCodesLength()):
        oc = model.OperatorCodes(i)
        code = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
        codes.append("CUSTOM" if code == 32 else opnames.get(code, f"builtin {code}"))
    ops = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        if not 0 <= op.OpcodeIndex() < len(codes):
            raise InteropError(f"operator {i}: opcode index {op.OpcodeIndex()} outside the file's "
                               f"{len(codes)} operator codes")
        name = codes[op.OpcodeIndex()]
        ins = [int(v) for v in op.InputsAsNumpy()] if op.InputsLength() else []
        outs = [int(v) for v in op.OutputsAsNumpy()] if op.OutputsLength() else []
        if any(not -1 <= v < n for v in ins) or any(not 0 <= v < n for v in outs):
            raise InteropError(f"operator {i} ({name}): tensor index outside the file's {n} tensors")
        ops.append(Operator(i, name, ins, outs, _options(tfl, op, name)))
    ins = [int(v) for v in sg.InputsAsNumpy()] if sg.InputsLength() else []
    outs = [int(v) for v in sg.OutputsAsNumpy()] if sg.OutputsLength() else []
    if any(not 0 <= v < n for v in ins + outs):
        raise InteropError(f"the graph's inputs/outputs name tensors outside the file's {n} tensors")
    desc = model.Description().decode("utf-8", "replace") if model.Description() else ""
    name = sg.Name().decode("utf-8", "replace") if sg.Name() else ""
    return Model(name, desc, tensors, ops, ins, outs)


def read(path: str | Path) -> Model:
    """`parse` of a file, its size checked before it is read."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InteropError(f"'{p.name}' has {size:,} bytes, more than the limit {MAX_FILE_BYTES:,}")
        data = p.read_bytes()
    except OSError as e:
        raise InteropError(f"cannot read '{p}': {e.strerror or e}") from None
    return parse(data, p.name)
