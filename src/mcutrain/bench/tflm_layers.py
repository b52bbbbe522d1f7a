"""TFLite Micro's interpreter as the reference: its outputs, and every layer's output tensor.

How TFLM gives back an intermediate tensor: the `tflite-micro` Python interpreter built with
`InterpreterConfig.kPreserveAllTensors` plans its arena without reusing any tensor's memory,
so after `invoke()` every tensor still holds what the kernel that wrote it computed, and
`GetTensor(index, subgraph)` returns it. The layers are read from the very run whose logits
are compared, so nothing is emulated (no truncated models). `tflite_export.to_tflite_mapped`
says which tensor index holds which IR tensor.

Each layer is compared two ways, in each rounding mode: `chained` (the whole model run by
mcutrain from the same input: differences compound with depth, what a user sees) and
`isolated` (the layer run by mcutrain on TFLM's own input tensors: the layer's kernel alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from mcutrain.engines import int_engine
from mcutrain.graph import INPUT
from mcutrain.qmodel import QuantModel

MODES = ("tflite", "single")
CHUNK = 100
"""Samples per comparison step: every tensor of the chunk is held at once, on both sides."""


def interpreter(data: bytes, preserve_all: bool = False):
    """TFLM's interpreter on the `.tflite` bytes; `preserve_all` keeps every tensor readable."""
    from tflite_micro.python.tflite_micro import runtime  # the tests' dev extra

    config = (runtime.InterpreterConfig.kPreserveAllTensors if preserve_all
              else runtime.InterpreterConfig.kAllocationRecording)
    return runtime.Interpreter.from_bytes(data, intrepreter_config=config)


def tflm_run(data: bytes, x_q: np.ndarray, tensors: tuple[int, ...] = ()
             ) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """TFLM's int8 outputs (N, K) for each int8 sample of `x_q` (one invoke per sample, as on a
    device), and the flat contents (N, size) of each tensor index in `tensors` after each invoke."""
    interp = interpreter(data, preserve_all=bool(tensors))
    out, kept = [], {i: [] for i in tensors}
    for s in range(len(x_q)):
        interp.set_input(x_q[s:s + 1], 0)
        interp.invoke()
        out.append(np.array(interp.get_output(0)).reshape(-1))
        for i in tensors:
            kept[i].append(np.array(interp.GetTensor(i, 0)["tensor_data"]).reshape(-1))
    return np.stack(out), {i: np.stack(v) for i, v in kept.items()}


def tflm_outputs(data: bytes, x_q: np.ndarray) -> np.ndarray:
    """TFLM's int8 outputs for each int8 sample of `x_q`."""
    return tflm_run(data, x_q)[0]


def agreement(ours: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """How far two (N, K) int8 logit arrays agree (golden engine or generated C against TFLM)."""
    ours, ref = ours.reshape(len(ref), -1).astype(np.int32), ref.reshape(len(ref), -1).astype(np.int32)
    return {"logits_equal": float(np.mean(ours == ref)),
            "samples_equal": float(np.mean(np.all(ours == ref, axis=1))),
            "max_diff": int(np.abs(ours - ref).max()),
            "argmax_equal": float(np.mean(ours.argmax(1) == ref.argmax(1)))}


@dataclass
class Tally:
    """Bit-identical elements and the largest difference of one layer, summed over chunks."""

    equal: int = 0
    total: int = 0
    max_diff: int = 0

    def add(self, ours: np.ndarray, ref: np.ndarray) -> None:
        d = np.abs(ours.reshape(len(ref), -1).astype(np.int32) - ref.reshape(len(ref), -1).astype(np.int32))
        self.equal += int(np.count_nonzero(d == 0))
        self.total += d.size
        self.max_diff = max(self.max_diff, int(d.max()))


@dataclass
class Layer:
    """One compared IR tensor: its node, the file's tensor index, a tally per mode and way."""

    name: str
    op: str
    index: int
    shape: tuple[int, ...]
    tallies: dict[str, Tally] = field(default_factory=dict)

    def tally(self, key: str) -> Tally:
        return self.tallies.setdefault(key, Tally())


def compared_layers(qm: QuantModel, tensors: dict[str, int]) -> list[Layer]:
    """Every node whose output is a tensor of its own in the file (an implicit flatten is not)."""
    layers = []
    for n in qm.graph.nodes:
        idx = tensors.get(n.name)
        if idx is not None and idx != tensors.get(n.inputs[0]):
            op = "depthwise" if n.op.value == "conv2d" and n.attrs["groups"] > 1 else n.op.value
            layers.append(Layer(n.name, op, idx, qm.graph.shape(n.name)))
    return layers


def compare_layers(qm: QuantModel, data: bytes, tensors: dict[str, int], x_q: np.ndarray,
                   chunk: int = CHUNK) -> tuple[np.ndarray, list[Layer]]:
    """TFLM's outputs on `x_q` and the per-layer tallies of mcutrain against them, in both modes.

    `data` must be the file `tensors` maps (`to_tflite_mapped(qm)`)."""
    layers = compared_layers(qm, tensors)
    g = qm.graph
    read = tuple(sorted({tensors[INPUT], *(lay.index for lay in layers)}))
    by_node = {n.name: n for n in g.nodes}
    models = {m: replace(qm, rounding=m) for m in MODES}
    outs = []
    for i in range(0, len(x_q), chunk):
        xc = x_q[i:i + chunk]
        out, ref = tflm_run(data, xc, read)
        outs.append(out)
        for mode, m in models.items():
            ours = int_engine.run(m, xc)
            for lay in layers:
                node = by_node[lay.name]
                lay.tally(f"{mode}_chained").add(ours[lay.name], ref[lay.index])
                ins = [ref[tensors[t]].reshape(len(xc), *g.shape(t)) for t in node.inputs]
                alone = int_engine.run_node(m, node, ins)
                lay.tally(f"{mode}_isolated").add(alone, ref[lay.index])
    return np.concatenate(outs), layers


def layer_rows(model: str, layers: list[Layer]) -> list[dict[str, Any]]:
    """JSON rows: per layer, the fraction of bit-identical elements and the largest difference,
    chained and isolated, in each rounding mode."""
    rows = []
    for lay in layers:
        row: dict[str, Any] = {"model": model, "layer": lay.name, "op": lay.op, "tensor_index": lay.index,
                               "shape": "x".join(map(str, lay.shape))}
        for key, t in lay.tallies.items():
            row[f"{key}_equal"] = t.equal / t.total if t.total else None
            row[f"{key}_max_diff"] = t.max_diff
        rows.append(row)
    return rows
