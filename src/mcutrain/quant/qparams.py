"""Quantization parameters: how an integer tensor maps to real values.

``real = scale * (q - zero_point)``. A ``QParams`` is per tensor (scale of
shape ``()``) or per channel (shape ``(C,)``); per-channel parameters always
apply along the *first* axis of the tensor they quantize, the output channels
of OHWI conv weights and the rows of (O, I) linear weights.

Two storage types:
- ``int8``, the inference format (CMSIS-NN / TFLite convention): activations
  asymmetric per tensor, weights symmetric per output channel (zero point 0,
  levels -127..127), biases int32 (``quantize_bias``).
- ``uint8``, seed A's format (Deutel et al., IEEE TCAD 2025):
  ``s = (max - min) / 255``, ``z = floor(-min / s)``, ``q = floor(v / s) + z``
  clamped to [0, 255].

Every range is first widened to contain 0 so that real 0 (zero padding, ReLU)
is exactly representable; for ranges that already contain 0 (weights, errors,
post-ReLU activations) this is the seed's formula unchanged.

All arithmetic is float32 with the operation order written in each function,
because a device recomputing qparams (FQT's dynamic ranges) must get the same
bits. A C port must be compiled without FMA contraction (``-ffp-contract=off``).

Example:
    >>> qp = qparams_from_range(-1.0, 3.0)
    >>> float(qp.scale), int(qp.zero_point)
    (0.01568627543747425, -64)
    >>> qp.quantize(np.array([0.0, 3.0], np.float32)).tolist()
    [-64, 127]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mcutrain.quant.rounding import UniformSource, round_half_away, round_mode

DTYPES = {"int8": (-128, 127, np.int8), "uint8": (0, 255, np.uint8)}

DEGENERATE_SCALE = np.float32(1.0)
"""Scale of an asymmetric range with max == min == 0 (nothing to resolve; never divide by 0)."""
ZERO_CHANNEL_SCALE = np.float32(2.0**-20)
"""Scale of an all-zero symmetric (weight) channel: tiny, so the channel stays near 0 when it
starts to train, yet large enough that a bias of that channel (scale s_x * s_w) stays in int32
for ordinary activation scales, and multipliers s_x * s_w / s_y stay representable."""
MIN_SCALE = np.float32(2.0**-126)
"""Smallest scale ever produced (the smallest normal float32): a nonzero range so small that
(max - min) / 255 would underflow still gets a positive, normal scale."""

_F32 = np.float32
F32_MAX = float(np.finfo(np.float32).max)


def _levels(dtype: str) -> tuple[int, int, type]:
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ValueError(f"unknown quantized dtype {dtype!r}; use 'int8' or 'uint8'") from None


@dataclass(frozen=True, eq=False)
class QParams:
    """Scale (float32) and zero point (int32) of a tensor; per tensor or per first-axis channel."""

    scale: np.ndarray
    zero_point: np.ndarray
    dtype: str = "int8"

    def __post_init__(self) -> None:
        lo, hi, _ = _levels(self.dtype)
        if np.ndim(self.scale) == 0 and np.ndim(self.zero_point) == 0:
            self._init_per_tensor(lo, hi)
            return
        if self._init_per_channel_f32(lo, hi):
            return
        scale = np.asarray(self.scale, dtype=np.float64)
        zp = np.asarray(self.zero_point)
        if scale.ndim > 1:
            raise ValueError(f"scale must be a scalar or a 1-D per-channel array, got shape {scale.shape}")
        if zp.shape != scale.shape:
            zp = np.broadcast_to(zp, scale.shape)
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise ValueError(f"scale must be finite and > 0, got {scale}")
        if np.any(scale > np.finfo(np.float32).max):
            raise ValueError(f"scale {scale} does not fit in float32")
        if zp.dtype.kind == "f" and np.any(zp != np.round(zp)):
            raise ValueError(f"zero point must be an integer, got {zp}")
        if np.any(zp < lo) or np.any(zp > hi):
            raise ValueError(f"zero point {zp} outside [{lo}, {hi}] of {self.dtype}")
        object.__setattr__(self, "scale", scale.astype(np.float32))
        object.__setattr__(self, "zero_point", zp.astype(np.int32))

    def _init_per_channel_f32(self, lo: int, hi: int) -> bool:
        """`__post_init__` of float32 scales with int32 zero points of one 1-D shape (what
        `qparams_from_range` builds): the same checks in four reductions. False: another input."""
        s, zp = self.scale, self.zero_point
        if not (isinstance(s, np.ndarray) and isinstance(zp, np.ndarray) and s.dtype == np.float32
                and zp.dtype == np.int32 and s.ndim == 1 and zp.shape == s.shape and s.size):
            return False
        # NOTE: min > 0 is False for a NaN; a float32 below inf fits float32
        if not (s.min() > 0 and s.max() < np.inf):
            return False                  # the general path raises with its message
        if zp.min() < lo or zp.max() > hi:
            return False
        object.__setattr__(self, "scale", s.copy())
        object.__setattr__(self, "zero_point", zp.copy())
        return True

    def _init_per_tensor(self, lo: int, hi: int) -> None:
        """`__post_init__` of a per-tensor scale and zero point: the same checks and values in
        Python scalars (FQT builds a dozen of these per step; the array form costs ~15 numpy calls)."""
        s = float(self.scale)
        if not (math.isfinite(s) and s > 0):
            raise ValueError(f"scale must be finite and > 0, got {np.float64(s)}")
        if s > F32_MAX:
            raise ValueError(f"scale {np.float64(s)} does not fit in float32")
        zp = np.asarray(self.zero_point)
        z = float(zp) if zp.dtype.kind == "f" else int(zp)
        if isinstance(z, float) and (z != z or (math.isfinite(z) and not z.is_integer())):
            raise ValueError(f"zero point must be an integer, got {zp}")
        if z < lo or z > hi:
            raise ValueError(f"zero point {zp} outside [{lo}, {hi}] of {self.dtype}")
        object.__setattr__(self, "scale", np.array(s, np.float32))
        object.__setattr__(self, "zero_point", np.array(int(z), np.int32))

    @property
    def qmin(self) -> int:
        """Smallest storable integer of the dtype."""
        return _levels(self.dtype)[0]

    @property
    def qmax(self) -> int:
        """Largest storable integer of the dtype."""
        return _levels(self.dtype)[1]

    @property
    def per_channel(self) -> bool:
        return self.scale.ndim == 1

    @property
    def np_dtype(self) -> type:
        return _levels(self.dtype)[2]

    def _broadcast(self, ndim: int) -> tuple[np.ndarray, np.ndarray]:
        """Scale and zero point shaped to broadcast along axis 0 of an ndim tensor."""
        if not self.per_channel:
            return self.scale, self.zero_point
        if ndim < 1:
            raise ValueError("per-channel qparams need a tensor with at least one axis (channels first)")
        shape = (-1,) + (1,) * (ndim - 1)
        return self.scale.reshape(shape), self.zero_point.reshape(shape)

    def _check_channels(self, arr: np.ndarray) -> None:
        if self.per_channel and (arr.ndim < 1 or arr.shape[0] != self.scale.shape[0]):
            raise ValueError(f"per-channel qparams have {self.scale.shape[0]} channels but the tensor's "
                             f"first axis is {arr.shape[:1]}; channels are always axis 0")

    def quantize(self, x_float: np.ndarray | float, rounding: str = "nearest",
                 rng: UniformSource | None = None) -> np.ndarray:
        """``clamp(round(float32(x) / scale) + zero_point, qmin, qmax)`` in float32, as int8/uint8.

        Order: x is cast to float32, divided by the float32 scale (one IEEE
        division), rounded by ``rounding`` (nearest = half away from zero,
        floor, stochastic), then clamped and offset. NaN is refused.
        """
        x = np.asarray(x_float, dtype=np.float32)
        self._check_channels(x)
        if np.isnan(x).any():
            raise ValueError("cannot quantize NaN values; check the float tensor for a diverged computation")
        scale, zp = self._broadcast(x.ndim)
        with np.errstate(over="ignore"):
            v = round_mode(x / scale, rounding, rng)
        v = np.clip(v, self.qmin - zp.astype(np.float32), self.qmax - zp.astype(np.float32))
        return (v.astype(np.int32) + zp).astype(self.np_dtype)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        """``float32(q - zero_point) * scale`` in float32."""
        arr = np.asarray(q)
        self._check_channels(arr)
        scale, zp = self._broadcast(arr.ndim)
        return (arr.astype(np.int32) - zp).astype(np.float32) * scale

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; float32 scales survive the round trip exactly (shortest-repr doubles)."""
        if self.per_channel:
            return {"dtype": self.dtype, "scale": [float(s) for s in self.scale],
                    "zero_point": [int(z) for z in self.zero_point]}
        return {"dtype": self.dtype, "scale": float(self.scale), "zero_point": int(self.zero_point)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> QParams:
        try:
            return cls(np.asarray(d["scale"], dtype=np.float32), np.asarray(d["zero_point"]),
                       d.get("dtype", "int8"))
        except KeyError as e:
            raise ValueError(f"qparams entry lacks {e}; expected keys scale, zero_point, dtype") from None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QParams):
            return NotImplemented
        return (self.dtype == other.dtype and self.scale.shape == other.scale.shape
                and bool(np.all(self.scale == other.scale))
                and bool(np.all(self.zero_point == other.zero_point)))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"QParams(scale={self.scale.tolist()}, zero_point={self.zero_point.tolist()}, "
                f"dtype={self.dtype!r})")


def _finite_f32(name: str, v: np.ndarray | float) -> np.ndarray:
    if np.ndim(v) == 0:                    # NOTE: a per-tensor range, checked in Python scalars
        f = float(v)
        if not math.isfinite(f):
            raise ValueError(f"range {name} must be finite, got {np.float64(f)}")
        if abs(f) > F32_MAX:
            raise ValueError(f"range {name} {np.float64(f)} does not fit in float32")
        return np.array(f, np.float32)
    if isinstance(v, np.ndarray) and v.dtype == np.float32:
        # NOTE: FQT's per-channel ranges: a finite float32 fits float32, so one check and a copy
        if not np.isfinite(v).all():
            raise ValueError(f"range {name} must be finite, got {v.astype(np.float64)}")
        return v.copy()
    arr = np.asarray(v, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"range {name} must be finite, got {arr}")
    if np.any(np.abs(arr) > np.finfo(np.float32).max):
        raise ValueError(f"range {name} {arr} does not fit in float32")
    return arr.astype(np.float32)


def qparams_from_range(lo: np.ndarray | float, hi: np.ndarray | float, dtype: str = "int8",
                       symmetric: bool = False) -> QParams:
    """QParams covering [lo, hi] (scalars: per tensor; 1-D arrays: per channel).

    All in float32, in this order (``0`` is included in the range first):

    - asymmetric: ``lo = min(lo, 0)``, ``hi = max(hi, 0)``, ``s = (hi - lo) / 255``;
      int8: ``z = clamp(round_half_away(-128 - lo / s), -128, 127)``;
      uint8 (seed A): ``z = clamp(floor(-lo / s), 0, 255)``.
      ``hi == lo == 0`` gives ``s = DEGENERATE_SCALE`` (1.0), ``z`` from the same formula.
    - symmetric: ``s = max(|lo|, |hi|) / 127``; z = 0 (int8) or 128 (uint8, levels 1..255).
      An all-zero range gives ``ZERO_CHANNEL_SCALE``.

    A nonzero range whose scale would underflow gets ``MIN_SCALE``. A range whose
    width overflows float32 is refused.
    """
    _levels(dtype)
    if np.ndim(lo) == 0 and np.ndim(hi) == 0:
        return _per_tensor_qparams(_finite_f32("min", lo)[()], _finite_f32("max", hi)[()], dtype, symmetric)
    lo32 = np.minimum(_finite_f32("min", lo), _F32(0))
    hi32 = np.maximum(_finite_f32("max", hi), _F32(0))
    if lo32.shape != hi32.shape:
        raise ValueError(f"range min and max shapes differ: {lo32.shape} vs {hi32.shape}")
    if lo32.ndim > 1:
        raise ValueError("ranges are scalars (per tensor) or 1-D arrays (per channel)")
    if symmetric:
        amax = np.maximum(-lo32, hi32)
        scale = amax / _F32(127)
        scale = np.where(amax == 0, ZERO_CHANNEL_SCALE, np.maximum(scale, MIN_SCALE)).astype(np.float32)
        zp = np.full(scale.shape, 0 if dtype == "int8" else 128, dtype=np.int32)
        return QParams(scale, zp, dtype)
    with np.errstate(over="ignore"):
        width = hi32 - lo32
    if not np.all(np.isfinite(width)):
        raise ValueError(f"range [{lo}, {hi}] is wider than float32 can hold; clip the values first")
    scale = width / _F32(255)
    scale = np.where(width == 0, DEGENERATE_SCALE, np.maximum(scale, MIN_SCALE)).astype(np.float32)
    if dtype == "int8":
        zp = np.clip(round_half_away(_F32(-128) - lo32 / scale), -128, 127)
    else:
        zp = np.clip(np.floor(-lo32 / scale), 0, 255)
    return QParams(scale, zp.astype(np.int32), dtype)


def _per_tensor_qparams(lo: np.float32, hi: np.float32, dtype: str, symmetric: bool) -> QParams:
    """`qparams_from_range` of a per-tensor range, in numpy float32 scalars: the same operations
    in the same order (np.minimum(a, b) is `a if a < b else b` for non-NaN floats, so the sign of
    a zero bound is kept exactly), without the array machinery."""
    zero = _F32(0)
    lo32 = lo if lo < zero else zero
    hi32 = hi if hi > zero else zero
    if symmetric:
        amax = -lo32 if -lo32 > hi32 else hi32
        scale = amax / _F32(127)
        scale = ZERO_CHANNEL_SCALE if amax == 0 else (scale if scale > MIN_SCALE else MIN_SCALE)
        return QParams(np.array(scale, np.float32), np.array(0 if dtype == "int8" else 128, np.int32), dtype)
    with np.errstate(over="ignore"):
        width = hi32 - lo32
    if not math.isfinite(float(width)):
        raise ValueError(f"range [{lo}, {hi}] is wider than float32 can hold; clip the values first")
    scale = width / _F32(255)
    scale = DEGENERATE_SCALE if width == 0 else (scale if scale > MIN_SCALE else MIN_SCALE)
    if dtype == "int8":
        v = float(_F32(-128) - lo32 / scale)          # an exact float32 value; rounded half away
        t = math.trunc(v)
        z = t + (int(math.copysign(1, v)) if abs(v - t) >= 0.5 else 0)
        z = min(max(z, -128), 127)
    else:
        z = min(max(math.floor(float(-lo32 / scale)), 0), 255)
    return QParams(np.array(scale, np.float32), np.array(z, np.int32), dtype)


def per_channel_symmetric(w: np.ndarray, dtype: str = "int8") -> QParams:
    """Symmetric per-output-channel qparams of a weight tensor (channels = axis 0).

    ``scale[c] = max|w[c]| / 127`` in float32 (an all-zero channel gets
    ``ZERO_CHANNEL_SCALE``); zero point 0 for int8, 128 for uint8.
    """
    arr = np.asarray(w, dtype=np.float32)
    if arr.ndim < 1 or arr.shape[0] == 0:
        raise ValueError(f"weight tensor must have output channels on axis 0, got shape {arr.shape}")
    amax = np.abs(arr.reshape(arr.shape[0], -1)).max(axis=1) if arr.size else np.zeros(arr.shape[0])
    return qparams_from_range(-amax, amax, dtype=dtype, symmetric=True)


def quantize_bias(bias: np.ndarray, input_scale: float | np.ndarray,
                  weight_scale: np.ndarray) -> np.ndarray:
    """int32 bias with scale ``s_x * s_w[c]``: ``sat32(round_half_away(b / (s_x * s_w)))``.

    Computed in float64: ``(double)s_x * (double)s_w[c]`` is exact (two float32
    factors), then one division, one rounding, saturation to int32.
    """
    b = np.asarray(bias, dtype=np.float32).astype(np.float64)
    if np.isnan(b).any():
        raise ValueError("cannot quantize NaN bias values")
    s = np.float64(np.float32(input_scale)) * np.asarray(weight_scale, dtype=np.float32).astype(np.float64)
    with np.errstate(over="ignore"):
        q = round_half_away(b / s)
    return np.clip(q, -(2**31), 2**31 - 1).astype(np.int32)


@dataclass
class EmaRange:
    """Exponential moving average of a tensor's min and max (seed A's dynamic ranges).

    ``lo <- (1 - alpha) * lo + alpha * batch_min`` (same for ``hi``), in float32
    in exactly that order (``1 - alpha`` rounded once, two products, one sum);
    the first update takes the batch values. ``lo``/``hi`` are scalars or
    per-channel arrays.
    """

    alpha: float
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not 0.0 < float(self.alpha) <= 1.0:
            raise ValueError(f"EMA rate alpha must be in (0, 1], got {self.alpha}")
        self.alpha = float(np.float32(self.alpha))
        if (self.lo is None) != (self.hi is None):
            raise ValueError("EmaRange needs both lo and hi, or neither")
        if self.lo is not None:
            self.lo = _finite_f32("min", self.lo)
            self.hi = _finite_f32("max", self.hi)

    @property
    def initialized(self) -> bool:
        return self.lo is not None

    def update(self, batch_min: np.ndarray | float, batch_max: np.ndarray | float) -> None:
        bmin = _finite_f32("batch min", batch_min)
        bmax = _finite_f32("batch max", batch_max)
        if np.any(bmin > bmax):
            raise ValueError(f"batch min {bmin} exceeds batch max {bmax}")
        if self.lo is None:
            self.lo, self.hi = bmin.copy(), bmax.copy()
            return
        a = _F32(self.alpha)
        keep = _F32(1) - a
        self.lo = (keep * self.lo + a * bmin).astype(np.float32)
        self.hi = (keep * self.hi + a * bmax).astype(np.float32)

    def qparams(self, dtype: str = "int8", symmetric: bool = False) -> QParams:
        """QParams of the current range (``qparams_from_range``)."""
        if self.lo is None:
            raise ValueError("EmaRange has no range yet: call update() with a batch first")
        return qparams_from_range(self.lo, self.hi, dtype=dtype, symmetric=symmetric)

    def to_dict(self) -> dict[str, Any]:
        def enc(v: np.ndarray | None) -> Any:
            return None if v is None else (float(v) if v.ndim == 0 else [float(x) for x in v])
        return {"alpha": self.alpha, "lo": enc(self.lo), "hi": enc(self.hi)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EmaRange:
        return cls(d["alpha"], None if d.get("lo") is None else np.asarray(d["lo"], np.float32),
                   None if d.get("hi") is None else np.asarray(d["hi"], np.float32))
