"""Float32 training of a model graph: pretraining, and the upper bound other methods are held to.

`FloatMethod` is the float engine plus an optimizer behind the interface
every method shares, so the shared loop (`loop.fit`) drives it like the
integer methods; `train` and `evaluate` are the short forms used by
`mcutrain pretrain` and by Python users. Training changes the graph's own
parameter arrays in place.

Example:
    >>> from sklearn.datasets import load_digits
    >>> from mcutrain import zoo
    >>> d = load_digits()
    >>> x = (d.images / 16.0).astype(np.float32)[..., None]
    >>> g = zoo.build("digits-cnn", seed=0)
    >>> history = train(g, x[::2], d.target[::2], epochs=5, batch=32, lr=3e-3, seed=0,
    ...                 progress=False)
    >>> evaluate(g, x[1::2], d.target[1::2]) > 0.9
    True
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from mcutrain.engines import float_engine as fe
from mcutrain.engines import ptq
from mcutrain.graph import INPUT, Graph
from mcutrain.methods.base import StepStats, TrainingMethod
from mcutrain.methods.decisions import float_decisions
from mcutrain.methods.loop import fit
from mcutrain.methods.optim import make_optimizer
from mcutrain.qmodel import QuantModel


class FloatMethod(TrainingMethod):
    """Back-propagation in float32 with SGD-momentum or Adam over the `trainable` layers."""

    name = "float"

    def __init__(self, graph: Graph, optimizer: str = "adam", trainable: Sequence[str] | None = None,
                 calib_x: np.ndarray | None = None, **optimizer_kwargs: Any):
        layers = [n.name for n in graph.parametric()]
        self.trainable = layers if trainable is None else list(trainable)
        unknown = sorted(set(self.trainable) - set(layers))
        if unknown:
            raise ValueError(f"trainable layers {unknown} are not conv2d/linear nodes of '{graph.name}'; "
                             f"layers: {', '.join(layers)}")
        self.graph = graph
        self.calib_x = None if calib_x is None else np.asarray(calib_x, np.float32)
        """The run's calibration samples (not state): `trained_model` quantizes on them."""
        self.decisions = float_decisions(graph, self.trainable)
        """What the planner and the code generator read (`methods.decisions`)."""
        self.optimizer = make_optimizer(optimizer, **optimizer_kwargs)
        self.params: dict[str, np.ndarray] = {}
        for name in self.trainable:
            node = graph.node(name)
            for k, v in node.params.items():
                # NOTE: updates are in place, so each parameter must be its own writable float32 array.
                if v.dtype != np.float32 or not v.flags.writeable:
                    node.params[k] = v = np.array(v, np.float32)
                self.params[f"{name}.{k}"] = v
        self._macs = _step_macs(graph, set(self.trainable))

    def step(self, x: np.ndarray, y: np.ndarray, lr: float) -> StepStats:
        acts = fe.run(self.graph, x)
        logits = acts[self.graph.output].reshape(len(x), -1)
        loss, d_logits = fe.softmax_cross_entropy(logits, y)
        t0 = time.perf_counter()
        grads, _ = fe.backward(self.graph, acts, d_logits, trainable=self.trainable, input_grad=False)
        seconds = time.perf_counter() - t0
        flat = {f"{name}.{k}": g for name, pair in grads.items() for k, g in pair.items()}
        self.optimizer.step(self.params, flat, lr)
        correct = int(np.sum(logits.argmax(1) == y))
        return StepStats(loss, correct, len(y), {k: v * len(y) for k, v in self._macs.items()}, seconds)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return fe.forward(self.graph, x).argmax(1)

    def to_graph(self) -> Graph:
        """A copy of the model as trained so far (what `mcutrain train -o` saves)."""
        return self.graph.copy()

    def trained_model(self) -> QuantModel:
        """PTQ (`engines.ptq`, min/max) of the trained float graph on the run's calibration samples."""
        if self.calib_x is None:
            raise ValueError("the float method quantizes its trained model on calibration samples: "
                             "construct it with calib_x")
        return ptq.quantize_model(self.graph, self.calib_x)

    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta, opt_arrays = self.optimizer.state()
        arrays = {f"param/{k}": v.copy() for k, v in self.params.items()}
        arrays |= {f"opt/{k}": v for k, v in opt_arrays.items()}
        return {"optimizer": meta}, arrays

    def check_state(self, meta: Any, arrays: dict[str, np.ndarray], max_steps: int) -> list[str]:
        from mcutrain.methods import state_checks
        return state_checks.float_method(self, meta, arrays, max_steps)

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        for k, v in self.params.items():
            np.copyto(v, arrays[f"param/{k}"])  # in place: the graph holds these arrays
        self.optimizer.load_state(meta["optimizer"],
                                  {k[4:]: v for k, v in arrays.items() if k.startswith("opt/")})

    def config(self) -> dict[str, Any]:
        return {"method": self.name, "trainable": list(self.trainable), **self.optimizer.config()}


def _step_macs(graph: Graph, trainable: set[str]) -> dict[str, int]:
    """Per-sample MACs of one step: forward, error propagation, weight gradients.

    Error propagation runs through a conv/linear only if a trainable layer
    lies before it (the input gradient itself is never computed).
    """
    needs = {INPUT: False}
    error = 0
    for node in graph.nodes:
        if any(needs[s] for s in node.inputs):
            error += graph.macs(node)
        needs[node.name] = node.name in trainable or any(needs[s] for s in node.inputs)
    return {"forward": graph.total_macs(), "error": error,
            "weight_grad": sum(graph.macs(graph.node(n)) for n in trainable)}


def train(graph: Graph, x: np.ndarray, y: np.ndarray, epochs: int, batch: int, lr: float, seed: int,
          optimizer: str = "adam", progress: bool = True, x_val: np.ndarray | None = None,
          y_val: np.ndarray | None = None, trainable: Sequence[str] | None = None,
          **optimizer_kwargs: Any) -> list[dict[str, Any]]:
    """Train `graph` in place with a cosine-decayed `lr`; one dict per epoch.

    Each entry has `epoch`, `loss` (mean training loss), `train_accuracy`
    (on the batches as they were trained) and, given (x_val, y_val),
    `val_accuracy` after the epoch. The data order comes from `seed` alone.
    """
    x = np.asarray(x, np.float32)
    y = np.asarray(y)
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"need as many labels as samples (and some samples): got {len(x)} and {len(y)}")
    method = FloatMethod(graph, optimizer, trainable, **optimizer_kwargs)
    has_val = x_val is not None and y_val is not None
    xv = np.asarray(x_val, np.float32) if has_val else x[:0]
    yv = np.asarray(y_val) if has_val else y[:0]
    # NOTE: the validation set is passed as fit's "test" set: pretraining reports it every
    # epoch and keeps the last epoch, rather than restoring the best validation epoch.
    result = fit(method, x, y, xv, yv, epochs=epochs, batch=batch, lr=lr, seed=seed,
                 schedule="cosine", progress=progress)
    history = []
    for e in result.history:
        entry = {"epoch": e["epoch"], "loss": e["loss"], "train_accuracy": e["train_accuracy"]}
        if has_val:
            entry["val_accuracy"] = e["test_accuracy"]
        history.append(entry)
    return history


def evaluate(graph: Graph, x: np.ndarray, y: np.ndarray, batch: int = 256) -> float:
    """Top-1 accuracy of the float graph on (x, y), in batches to bound memory."""
    if len(x) != len(y):
        raise ValueError(f"need as many labels as samples: got {len(x)} and {len(y)}")
    if len(x) == 0:
        return float("nan")
    hits = sum(int(np.sum(fe.forward(graph, x[i:i + batch]).argmax(1) == y[i:i + batch]))
               for i in range(0, len(x), batch))
    return hits / len(x)
