"""What one training step decides, made once per (method, configuration) and read by everyone.

The simulator, the planner and the code generator all need the same answers: which layers
train (weights, biases), which of them run dynamic partial updates and with which
lambda_min / lambda_max, the number formats of weights, biases, activations, errors and
per-sample gradients, and whether the weight gradient is applied as it is computed (a fused
update). `StepDecisions` holds them; a method builds it when it is constructed
(`FQT.decisions`, `ZOMethod.decisions`, ...), the planner's builders take the same object into
`plan.schedule.Schedule.decisions` (or build it with the same function from a plan request), and
the code generator reads it from the schedule. Nothing below this module re-derives a decision,
so `fingerprint()` equal means the three readers agree.

This lives in `methods` rather than `plan` because the simulator sits below the planner: the
planner may read methods, never the other way round.

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.methods.fqt_state import FQTConfig
    >>> from mcutrain.graph_passes import fold_batchnorm, fuse_activations
    >>> g = fuse_activations(fold_batchnorm(zoo.build("digits-cnn")))
    >>> d = fqt_decisions(g, FQTConfig(precision="int8", trainable="last:2", lambda_min=0.1))
    >>> d.weight_layers, d.partial_layers, d.formats.error
    (('conv2', 'fc'), ('conv2',), 's8')
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from mcutrain.graph import Graph
from mcutrain.methods.fqt_state import FQTConfig, Precision, precision
from mcutrain.methods.partial import PartialPolicy
from mcutrain.methods.trainable import resolve_trainable


@dataclass(frozen=True)
class Formats:
    """Number formats (the dtype tags of STYLE.md) of one method's tensors.

    `grad` is the format of one sample's weight gradient; how a batch of them is summed is the
    planner's buffer choice (`plan.schedules_backprop.batch_grad_dtype`).
    """

    weight: str
    bias: str
    act: str
    error: str
    grad: str


INT8 = Formats("s8", "s32", "s8", "f32", "f32")
"""zo / bp-qas: the int8 graph; bp-qas errors and gradients are float32 (the STE kernels)."""
FLOAT = Formats("f32", "f32", "f32", "f32", "f32")
"""float: float32 throughout."""

_TAG = {"u8": "u8", "s8": "s8", "f32": "f32"}


def fqt_formats(prec: Precision) -> Formats:
    """The formats of an FQT precision: the one place they are derived (see `fqt_state`'s table).

    uint8 quantizes each sample's gradient to uint8 (seed A); int8 keeps it an exact integer
    (int32); mixed and float32 keep float32 gradients.
    """
    if prec.quantize_sample_grads:
        grad = "u8"
    elif prec.errors == "s8":
        grad = "s32"
    else:
        grad = "f32"
    return Formats(_TAG[prec.weights], "f32" if prec.weights == "f32" else "s32", _TAG[prec.acts],
                   _TAG[prec.errors], grad)


@dataclass(frozen=True)
class StepDecisions:
    """Every decision of one training step of one method and configuration (module docstring)."""

    method: str
    formats: Formats
    weight_layers: tuple[str, ...]
    """Layers whose weights train, in graph order."""
    bias_layers: tuple[str, ...] = ()
    """Layers whose bias trains (bp-qas: the weight layers plus the last `bias_last`)."""
    partial: tuple[tuple[str, PartialPolicy], ...] = ()
    """(layer, its lambda_min / lambda_max) of every layer that runs dynamic partial updates."""
    fused_update: bool = False
    """The weight gradient is applied row by row as it is computed (bp-qas, float)."""
    precision: str = ""
    settings: tuple[tuple[str, str], ...] = ()
    """Further method settings that shape the step (zo: perturbation, queries, mask), as text."""

    @property
    def partial_layers(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.partial)

    def partial_policy(self, layer: str) -> PartialPolicy | None:
        """The partial-update policy of `layer`, or None when the layer trains fully."""
        return dict(self.partial).get(layer)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["partial"] = [[name, p.lambda_min, p.lambda_max] for name, p in self.partial]
        return d

    def fingerprint(self) -> str:
        """sha256 of the decisions: equal fingerprints, equal steps."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def fqt_partial_layers(graph: Graph, weight_layers: tuple[str, ...], cfg: FQTConfig) -> tuple[str, ...]:
    """The layers that run partial updates: every trained one when lambda_min < 1, except the
    output layer unless `partial_output` (the classifier trains fully by default)."""
    if not PartialPolicy(cfg.lambda_min, cfg.lambda_max).active:
        return ()
    return tuple(n for n in weight_layers if n != graph.output or cfg.partial_output)


def fqt_decisions(graph: Graph, cfg: FQTConfig) -> StepDecisions:
    """FQT's decisions on `graph` (BatchNorm folded, activations fused, as the method trains it)."""
    prec = precision(cfg.precision, cfg.weight_rounding, cfg.relative_update)
    chosen = set(resolve_trainable(graph, cfg.trainable))
    layers = tuple(n.name for n in graph.parametric() if n.name in chosen)
    policy = PartialPolicy(cfg.lambda_min, cfg.lambda_max)
    return StepDecisions("fqt", fqt_formats(prec), layers,
                         partial=tuple((n, policy) for n in fqt_partial_layers(graph, layers, cfg)),
                         precision=prec.name)


def bp_qas_decisions(graph: Graph, trainable: str, bias_last: int = 0,
                     momentum: float = 0.0) -> StepDecisions:
    """BP-QAS (Lin et al.'s static sparse update): weights of `trainable`, biases of the last `bias_last`."""
    chosen = set(resolve_trainable(graph, trainable))
    layers = [n.name for n in graph.parametric()]
    if not 0 <= bias_last <= len(layers):
        raise ValueError(f"bias_last must be in [0, {len(layers)}]")
    extra = set(layers[len(layers) - bias_last:]) if bias_last else set()
    return StepDecisions("bp-qas", INT8, tuple(n for n in layers if n in chosen),
                         tuple(n for n in layers if n in chosen | extra), fused_update=True,
                         settings=(("bias_last", str(bias_last)), ("momentum", repr(float(momentum)))))


def float_decisions(graph: Graph, layers: list[str]) -> StepDecisions:
    """float32 back-propagation with plain SGD of `layers` (resolved names)."""
    chosen = set(layers)
    return StepDecisions("float", FLOAT, tuple(n.name for n in graph.parametric() if n.name in chosen),
                         fused_update=True, precision="float32")


def zo_decisions(graph: Graph, layers: list[str], perturb: str, queries: int, mask: str) -> StepDecisions:
    """Quantized zeroth-order training of `layers` (resolved names) on the int8 graph."""
    chosen = set(layers)
    return StepDecisions("zo", INT8, tuple(n.name for n in graph.parametric() if n.name in chosen),
                         settings=(("perturb", perturb), ("queries", str(int(queries))), ("mask", mask)))
