"""FQT settings: the four precisions and the hyper-parameters of the dynamic ranges.

A precision names a number format for each tensor family:
- `u8`: seed A's uint8, per tensor, asymmetric, `floor` rounding, float32
  per-element requantization (Deutel et al., IEEE TCAD 2025).
- `s8`: int8 — per-output-channel symmetric weights, asymmetric per-tensor
  activations with fixed-point requantization (the inference format), and
  symmetric errors with power-of-two scales.
- `f32`: float32 values.

| precision | weights | activations | errors | per-sample gradient | weight rounding |
|---|---|---|---|---|---|
| uint8   | u8  | u8  | u8  | quantized to u8 (seed) | nearest (1) |
| mixed   | u8  | u8  | f32 | float32                | nearest (1) |
| float32 | f32 | f32 | f32 | float32                | —     |
| int8    | s8  | s8  | s8  | exact integer          | stochastic (xorshift32) |

(1) The seed writes `floor` for every quantization; activations, errors and
per-sample gradients keep it, but applied to the in-place weight update it loses
half a step per update and the network collapses (Fashion-MNIST, 12k samples:
uint8 53.6% with floor vs 78.6% with nearest, mixed 44.8% vs 84.8%), so the
weight requantization rounds to nearest (`weight_rounding="floor"` restores it).

`relative_update` (an ablation, off by default) scales each layer's
standardized step by the layer's weight range at the start of training
(`lr * 127 * max_c s_w[c]`); measured worse on Fashion-MNIST (docs/methods.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

PRECISIONS = ("uint8", "mixed", "float32", "int8")
UPDATES = ("float", "integer")
"""The FQT int8 weight update: float32 (13.6-13.7) or integer-only fixed point (13.9)."""


@dataclass(frozen=True)
class Precision:
    """Number formats of one FQT precision (see the module table)."""

    name: str
    weights: str
    acts: str
    errors: str
    weight_rounding: str
    quantize_sample_grads: bool
    relative_update: bool = False
    """Scale each layer's standardized step by the layer's max|w| at the start of training."""

    @property
    def quantized_acts(self) -> bool:
        return self.acts != "f32"


_TABLE = {
    "uint8": Precision("uint8", "u8", "u8", "u8", "nearest", True),
    "mixed": Precision("mixed", "u8", "u8", "f32", "nearest", False),
    "float32": Precision("float32", "f32", "f32", "f32", "nearest", False),
    "int8": Precision("int8", "s8", "s8", "s8", "stochastic", False),
}


def precision(name: str, weight_rounding: str | None = None,
              relative_update: bool | None = None) -> Precision:
    """The precision's formats, with optional ablation overrides."""
    try:
        p = _TABLE[name]
    except KeyError:
        raise ValueError(f"unknown FQT precision {name!r}; use one of {', '.join(PRECISIONS)}") from None
    if weight_rounding is not None:
        if p.weights == "f32" or weight_rounding not in ("stochastic", "nearest", "floor"):
            raise ValueError("weight_rounding (stochastic | nearest | floor) needs quantized weights")
        p = replace(p, weight_rounding=weight_rounding)
    if relative_update is not None:
        p = replace(p, relative_update=relative_update)
    if p.relative_update and p.weights == "f32":
        raise ValueError("relative steps need quantized weights (their scale)")
    return p


@dataclass(frozen=True)
class FQTConfig:
    """Hyper-parameters of FQT (defaults: the seed's follow-up rates where it gives them).

    alpha_a / alpha_e: EMA rates of activation and error ranges (seed: 0.1);
    alpha_w: EMA rate of weight ranges after each update (the follow-up paper: 0.001); alpha_norm: EMA rate
    of the per-filter gradient mean and standard deviation; lambda_min /
    lambda_max: partial updates (1.0 = off); exact_float_order: float32 sums of
    the mixed and float32 precisions in the defined sequential order (slow;
    what the C twin reproduces) instead of BLAS.
    """

    precision: str = "int8"
    trainable: str = "all"
    alpha_a: float = 0.1
    alpha_e: float = 0.1
    alpha_w: float = 0.001
    alpha_norm: float = 0.1
    lambda_min: float = 1.0
    lambda_max: float = 1.0
    seed: int = 0
    exact_float_order: bool = False
    partial_output: bool = False
    """Apply partial updates to the output layer too (off: the classifier always trains fully)."""
    weight_rounding: str | None = None
    """Override of the precision's weight rounding (stochastic | nearest | floor), for ablations."""
    relative_update: bool | None = None
    """Override of the precision's relative step sizes, for ablations."""
    update: str = "float"
    """The int8 weight update: "float" (float32, 13.6-13.7) or "integer" (fixed point, 13.9: no
    float32 per weight, for cores without an FPU); the other precisions update in float32."""

    def __post_init__(self) -> None:
        if self.update not in UPDATES:
            raise ValueError(f"unknown FQT update {self.update!r}; use one of {', '.join(UPDATES)}")
        if self.update == "integer" and (self.precision != "int8"
                                         or self.weight_rounding not in (None, "stochastic")):
            raise ValueError("the integer update is int8's, with stochastic weight rounding "
                             f"(got precision {self.precision}, weight rounding {self.weight_rounding})")

    def to_dict(self) -> dict[str, Any]:
        """The settings; `update` only when not the float32 default, so the configuration of a
        float32-update run (a checkpoint, a model's provenance) reads as it did before the option."""
        d = asdict(self)
        if d["update"] == "float":
            del d["update"]
        return d
