"""The quantized model: an int8 graph's tensors, qparams and derived integer constants.

A `QuantModel` is the float graph (BatchNorm folded, activations fused) plus
what the integer engine needs: int8 weights with per-channel qparams, int32
biases, and the qparams of every activation tensor ('input', every node
output, the logits). Pooling, flatten and standalone relu outputs share their
input's qparams, so they need no requantization.

The "prepare" constants of each kernel (requantization multiplier and shift,
the add's two multipliers and shared shift, activation clamps) are derived
here, in one place, and cached by the scales they come from — so a training
method that changes a scale gets fresh constants without any invalidation.

It is saved in the ordinary model file format: int tensors as extra arrays
`q/<node>/weight` and `q/<node>/bias`, qparams and the rounding mode in `meta["quant"]`.

`rounding` is part of the model's integer semantics (docs/integer-semantics.md 6.1):
`single` (the default: one rounding, half away from zero) or `tflite` (TFLite's double
rounding, what a model imported from a .tflite file runs with on TFLite Micro). A file
written before the field existed has no key and loads as `single`, the only mode it knew.

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.engines import ptq
    >>> x = np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)
    >>> qm = ptq.quantize_model(zoo.build("digits-cnn"), x)
    >>> sorted(qm.weights)
    ['conv1', 'conv2', 'fc']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import io
from mcutrain.graph import INPUT, PARAMETRIC, Graph, Node, Op
from mcutrain.quant.fixedpoint import (
    activation_range,
    add_multipliers,
    check_rounding,
    output_multiplier,
    tflite_add_params,
    tflite_mean_params,
)
from mcutrain.quant.qparams import QParams

QUANT_FORMAT = "int8-v1"
"""Tag of the quantization scheme in `meta["quant"]["scheme"]`: int8 asymmetric per-tensor
activations, int8 symmetric per-channel weights, int32 biases, fixed-point requantization."""

SHARES_INPUT_QPARAMS = frozenset({Op.MAXPOOL, Op.AVGPOOL, Op.GLOBAL_AVGPOOL, Op.FLATTEN,
                                  Op.RELU, Op.RELU6})
"""Ops whose output has the same qparams as their (first) input: no requantization."""


@dataclass
class QuantModel:
    """An int8 model: graph + int8 weights, int32 biases and qparams of every tensor."""

    graph: Graph
    act_qparams: dict[str, QParams]
    weights: dict[str, np.ndarray]
    weight_qparams: dict[str, QParams]
    biases: dict[str, np.ndarray]
    provenance: dict[str, Any] = field(default_factory=dict)
    """Where the model came from (dataset, float accuracy, calibration); saved with it."""
    rounding: str = "single"
    """Requantization rounding mode, "single" or "tflite" (`quant.fixedpoint.ROUNDING_MODES`)."""
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.validate()

    # -- consistency
    def validate(self) -> None:
        """Refuse a model whose tensors or qparams do not match its graph (names the node)."""
        g = self.graph
        check_rounding(self.rounding)
        for t in [INPUT, *(n.name for n in g.nodes)]:
            qp = self.act_qparams.get(t)
            if qp is None:
                raise ValueError(f"tensor '{t}' has no activation qparams")
            if qp.per_channel or qp.dtype != "int8":
                raise ValueError(f"tensor '{t}': activations must be int8 per tensor, got {qp!r}")
        for n in g.nodes:
            if n.op in (Op.BATCHNORM,):
                raise ValueError(f"node '{n.name}': fold BatchNorm before quantizing")
            if n.op in SHARES_INPUT_QPARAMS and self.act_qparams[n.name] != self.act_qparams[n.inputs[0]]:
                raise ValueError(f"node '{n.name}' ({n.op.value}) must share the qparams of its input")
            if n.op not in PARAMETRIC:
                continue
            w, b = self.weights.get(n.name), self.biases.get(n.name)
            wq = self.weight_qparams.get(n.name)
            if w is None or b is None or wq is None:
                raise ValueError(f"node '{n.name}': int8 weight, int32 bias or weight qparams missing")
            o = n.params["weight"].shape[0]
            if w.shape != n.params["weight"].shape or w.dtype != np.int8:
                raise ValueError(f"node '{n.name}': int8 weight must have shape "
                                 f"{n.params['weight'].shape}, got {w.dtype} {w.shape}")
            if b.shape != (o,) or b.dtype != np.int32:
                raise ValueError(f"node '{n.name}': bias must be int32 ({o},), got {b.dtype} {b.shape}")
            if wq.scale.shape not in ((), (o,)) or np.any(wq.zero_point != 0):
                raise ValueError(f"node '{n.name}': weight qparams must be symmetric, per tensor or "
                                 f"per output channel ({o}), got {wq!r}")

    # -- lookups used by the engine
    def zero_point(self, tensor: str) -> int:
        return int(self.act_qparams[tensor].zero_point)

    def scale(self, tensor: str) -> np.float32:
        return np.float32(self.act_qparams[tensor].scale)

    def act_range(self, node: Node | str) -> tuple[int, int]:
        """Clamp bounds of a node's int8 output: its fused act, or the standalone relu/relu6."""
        node = self.graph.node(node) if isinstance(node, str) else node
        act = node.op.value if node.op in (Op.RELU, Op.RELU6) else node.act
        lo, hi = activation_range(self.act_qparams[node.name], act)
        return int(lo), int(hi)

    def requant_params(self, node: Node | str) -> tuple[np.ndarray, np.ndarray]:
        """Per-output-channel (multiplier int32, shift int32) for M_c = s_x * s_w[c] / s_y.

        `quant.fixedpoint.output_multiplier` derives them (float64
        (s_x * s_w[c]) / s_y, exact product, one rounding division).
        Cached by the three scales' bytes.
        """
        node = self.graph.node(node) if isinstance(node, str) else node
        if node.op not in PARAMETRIC:
            raise ValueError(f"node '{node.name}' ({node.op.value}) has no weight requantization")
        sx = self.act_qparams[node.inputs[0]].scale
        sw = self.weight_qparams[node.name].scale
        sy = self.act_qparams[node.name].scale
        o = self.weights[node.name].shape[0]
        key = ("rq", node.name, sx.tobytes(), sw.tobytes(), sy.tobytes(), o)
        if key not in self._cache:
            mult, shift = output_multiplier(sx, np.broadcast_to(sw, (o,)), sy)
            self._cache[key] = (np.asarray(mult, np.int32), np.asarray(shift, np.int32))
        return self._cache[key]

    def add_params(self, node: Node | str) -> tuple[int, ...]:
        """Constants of an add node in the model's rounding mode; cached by the scales.

        single: (Ma, Mb, n) of `quant.fixedpoint.add_multipliers`; tflite: (Ma, sa, Mb, sb, My, sy)
        of `quant.fixedpoint.tflite_add_params` (TFLite's three requantizations).
        """
        node = self.graph.node(node) if isinstance(node, str) else node
        s = [self.act_qparams[t].scale for t in (*node.inputs, node.name)]
        key = ("add", self.rounding, node.name, *(x.tobytes() for x in s))
        if key not in self._cache:
            rule = tflite_add_params if self.rounding == "tflite" else add_multipliers
            self._cache[key] = rule(*(float(x) for x in s))
        return self._cache[key]

    def mean_params(self, node: Node | str) -> tuple[int, int]:
        """(M', s') of a global average pool in mode tflite: TFLite's MEAN over H*W inputs."""
        node = self.graph.node(node) if isinstance(node, str) else node
        h, w, _ = self.graph.shape(node.inputs[0])
        return tflite_mean_params(h * w)

    # -- files
    def to_file(self, provenance: dict[str, Any] | None = None
                ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(meta, arrays) for `io.save`: int tensors as arrays, qparams as JSON."""
        arrays: dict[str, np.ndarray] = {}
        for name, w in self.weights.items():
            arrays[f"q/{name}/weight"] = w
            arrays[f"q/{name}/bias"] = self.biases[name]
        quant = {"scheme": QUANT_FORMAT, "rounding": self.rounding,
                 "activations": {t: qp.to_dict() for t, qp in self.act_qparams.items()},
                 "weights": {n: qp.to_dict() for n, qp in self.weight_qparams.items()}}
        prov = {**self.provenance, **(provenance or {})}
        return {"quant": quant, "provenance": prov}, arrays

    def save(self, path: str | Path, provenance: dict[str, Any] | None = None) -> Path:
        """Write the model file atomically (the float graph plus the int8 part)."""
        meta, arrays = self.to_file(provenance)
        return io.save(path, self.graph, meta, arrays)

    @classmethod
    def from_file(cls, mf: io.ModelFile) -> QuantModel:
        """Rebuild from a loaded `io.ModelFile`; a float-only file is refused with what to do."""
        quant = mf.meta.get("quant")
        if not isinstance(quant, dict):
            raise io.ModelFileError("this model file holds a float model only; quantize it first "
                                    "(mcutrain pretrain writes an int8 model)")
        if quant.get("scheme") != QUANT_FORMAT:
            raise io.ModelFileError(f"quantization scheme {quant.get('scheme')!r} is not supported; "
                                    f"this mcutrain reads {QUANT_FORMAT!r}")
        try:
            acts = {t: QParams.from_dict(d) for t, d in quant["activations"].items()}
            wqp = {n: QParams.from_dict(d) for n, d in quant["weights"].items()}
            weights = {n: mf.arrays[f"q/{n}/weight"] for n in wqp}
            biases = {n: mf.arrays[f"q/{n}/bias"] for n in wqp}
            rounding = quant.get("rounding", "single")   # files older than the field: single
            if not isinstance(rounding, str):
                raise ValueError(f"rounding must be a string, got {type(rounding).__name__}")
            return cls(mf.graph, acts, weights, wqp, biases, dict(mf.meta.get("provenance", {})),
                       rounding)
        except KeyError as e:
            raise io.ModelFileError(f"quantized model is incomplete: {e} is missing; "
                                    "re-create the file") from None
        except (ValueError, TypeError, AttributeError) as e:
            raise io.ModelFileError(f"quantized model is inconsistent: {e}") from None

    @classmethod
    def load(cls, path: str | Path) -> QuantModel:
        """Read a quantized model file written by `save`."""
        return cls.from_file(io.load(path))


def load(path: str | Path) -> QuantModel:
    """Shorthand for `QuantModel.load`."""
    return QuantModel.load(path)


def share_input_qparams(graph: Graph, act_qparams: dict[str, QParams]) -> dict[str, QParams]:
    """Fill in the outputs of pooling/flatten/relu nodes with their input's qparams (in order)."""
    out = dict(act_qparams)
    for n in graph.nodes:
        if n.op in SHARES_INPUT_QPARAMS:
            out[n.name] = out[n.inputs[0]]
    return out
