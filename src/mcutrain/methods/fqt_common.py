"""Shared pieces of the FQT method: formats' helpers, error tensors in flight, per-step records."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mcutrain.graph import Op
from mcutrain.quant.qparams import QParams

F32 = np.float32
SHARES_QPARAMS = frozenset({Op.MAXPOOL, Op.AVGPOOL, Op.GLOBAL_AVGPOOL, Op.FLATTEN, Op.RELU, Op.RELU6})
"""Ops whose output keeps its input's qparams (activations and errors alike)."""
ERROR_CLAMP = 127
"""int8 errors are symmetric: levels -127..127, so negation never saturates."""
X_MAX = 255
"""|x - z_x| <= 255 for every 8-bit activation: the GEMM exactness bound needs no scan of x."""
PRESCALE_BITS = 15
"""int8 error propagation: per-channel weight scales enter as Q15 ratios s_w[o] / max(s_w)."""
NORM_EPS = F32(1e-12)


def pow2_symmetric_qparams(lo: np.ndarray | float, hi: np.ndarray | float) -> QParams:
    """int8 error qparams: zero point 0, scale the smallest 2^e with 127 * 2^e >= max(|lo|, |hi|).

    Exact: with amax = f * 2^x (frexp, f in [0.5, 1)), e = x - 7 if f <= 127/128 else x - 6.
    A zero range gets 2^-24 (below any error the integer loss produces).
    """
    amax = float(max(-float(F32(lo)), float(F32(hi)), 0.0))
    if amax == 0.0:
        return QParams(np.float32(2.0**-24), np.int32(0), "int8")
    f, x = np.frexp(amax)
    e = int(x) - 7 if f <= 127 / 128 else int(x) - 6
    return QParams(np.float32(np.ldexp(1.0, max(e, -126))), np.int32(0), "int8")


def _act_clip(lo: F32, hi: F32, act: str) -> tuple[F32, F32]:
    """Real range of an activated tensor from its pre-activation range."""
    if act in ("relu", "relu6"):
        lo, hi = max(lo, F32(0)), max(hi, F32(0))
    if act == "relu6":
        lo, hi = min(lo, F32(6)), min(hi, F32(6))
    return F32(lo), F32(hi)


def _acc_range(acc: np.ndarray, scale: np.ndarray | F32) -> tuple[F32, F32]:
    """Real (min, max) of float32(acc) * scale (scale per tensor or per last-axis channel).

    NOTE: x -> float32(x) * s is monotone for s > 0, so the extremes of the
    accumulator give the extremes of the real tensor: a device tracks them on
    the fly and no float copy is kept.
    """
    s = np.asarray(scale, F32)
    if acc.size == 0:
        return F32(0), F32(0)
    if s.ndim == 0:
        return F32(F32(acc.min()) * s), F32(F32(acc.max()) * s)
    a2 = acc.reshape(-1, acc.shape[-1])
    return (F32((a2.min(0).astype(F32) * s).min()), F32((a2.max(0).astype(F32) * s).max()))


@dataclass
class _Err:
    """An error tensor in flight: centred values (int32/int64 or float32) and its scale (None: float)."""

    ec: np.ndarray
    scale: F32 | None


@dataclass
class _Batch:
    """What one step records: tensor ranges, kept tensors, gradient buffers, executed MACs."""

    act_ranges: dict[str, tuple[F32, F32]] = field(default_factory=dict)
    err_ranges: dict[str, tuple[F32, F32]] = field(default_factory=dict)
    grad_ranges: dict[str, tuple[F32, F32]] = field(default_factory=dict)
    kept: dict[str, np.ndarray] = field(default_factory=dict)
    grads: dict[str, tuple] = field(default_factory=dict)
    int_grads: dict[str, tuple] = field(default_factory=dict)
    """The integer update's (G, Gb, g_scale, gb_scale) per int8 layer (FQTConfig.update "integer")."""
    macs: dict[str, int] = field(default_factory=lambda: {"forward": 0, "error": 0, "weight_grad": 0})
    fresh: set = field(default_factory=set)
