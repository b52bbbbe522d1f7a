"""Quantization-aware scaling (QAS): SGD on int8 weights and int32 biases without a float copy.

Lin et al., "On-Device Training Under 256KB Memory", NeurIPS 2022: the
gradient of an integer tensor ``W_int = W / s_w`` is ``s_w`` times the float
gradient, so a float SGD step ``W -= lr * g`` becomes, in integer units,
``W_int -= lr * g_int / s_w^2`` (biases: scale ``s_x * s_w``, so
``/(s_x s_w)^2``). Without the scaling the integer updates are off by
``s_w^-2`` (about 10^4 for typical weights) and round to zero.

The update is the one float computation of ZO training, so its order is
fixed (``docs/integer-semantics.md``, "ZO training operations"), all float32:

    k[c]    = (float32(lr) * coef[c]) / (s[c] * s[c])      # s = s_w, or s_x * s_w for biases
    delta   = float32(S) * k[c]                             # S: the int64 gradient sum
    step    = round_half_away(clamp(delta, -2^30, 2^30))     # an integer number of steps
    W_int   = clamp(W_int - step, -127, 127)                 # biases: saturate to int32

where ``coef`` turns the integer gradient sum ``S`` into the gradient of the
integer tensor (``g_int = coef * S``). Without QAS, ``k[c] = float32(lr) * coef[c]``.

Update rounding (`UPDATE_ROUNDINGS`): ``nearest`` is the rounding above; ``stochastic``
rounds an int8 weight's step as ``floor(float32(clamp(delta) + r))`` with ``r`` one
`XorShift32.uniform01` draw per weight element (every element of the tensor, in C order,
a zero or NaN delta too; a NaN delta gives step 0 as in nearest), so an update smaller
than one weight step still moves the weight with probability ``|delta|``, in expectation
the unrounded update. Biases always round to nearest (their int32 steps are fine).
Weights stay symmetric in [-127, 127] (the int8 weight format); a C port
compiles this without FMA contraction.
"""

from __future__ import annotations

import numpy as np

from mcutrain.quant.rounding import round_half_away

W_MIN, W_MAX = -127, 127
B_MIN, B_MAX = -(2**31), 2**31 - 1
STEP_LIMIT = np.float32(2.0**30)
"""Largest single update in integer steps; beyond it the weight saturates anyway."""
UPDATE_ROUNDINGS = ("nearest", "stochastic")
"""How the int8 weight update rounds (`--update-rounding`, zo and bp-qas)."""


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    return v.reshape((-1,) + (1,) * (ndim - 1))


def update_factor(lr: float, coef: np.ndarray, scale: np.ndarray | None) -> np.ndarray:
    """float32 ``k[c] = (lr * coef[c]) / (scale[c] * scale[c])`` (``scale=None``: no QAS)."""
    k = np.float32(lr) * np.asarray(coef, np.float32)
    if scale is None:
        return k.astype(np.float32)
    s = np.asarray(scale, np.float32)
    return (k / (s * s)).astype(np.float32)


def _round_steps(delta: np.ndarray, r: np.ndarray | None) -> np.ndarray:
    """int64 steps of a clamped float32 delta: nearest, or ``floor(delta + r)`` given the draws r."""
    if r is None:
        return round_half_away(delta).astype(np.int64)
    up = np.floor(delta + np.asarray(r, np.float32).reshape(delta.shape))
    return np.where(np.isnan(delta), np.float32(0), up).astype(np.int64)


def integer_steps(grad_sum: np.ndarray, k: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
    """``round_half_away(clamp(float32(S) * k[c], +-2^30))`` as int64; channels on axis 0.

    With `r` (uniform01 draws, one per element in C order) the stochastic rounding instead."""
    s = np.asarray(grad_sum)
    delta = s.astype(np.float32) * _per_channel(np.asarray(k, np.float32), s.ndim)
    delta = np.clip(delta, -STEP_LIMIT, STEP_LIMIT)
    return _round_steps(delta, r)


def integer_steps_float(grad: np.ndarray, k: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
    """The same rounding for a float32 gradient (bp-qas): ``round_half_away(clamp(g * k[c]))``."""
    g = np.asarray(grad, np.float32)
    delta = np.clip(g * _per_channel(np.asarray(k, np.float32), g.ndim), -STEP_LIMIT, STEP_LIMIT)
    return _round_steps(delta, r)


def apply_weight_update(w: np.ndarray, grad_sum: np.ndarray, k: np.ndarray,
                        r: np.ndarray | None = None) -> np.ndarray:
    """New int8 weights ``clamp(w - steps, -127, 127)`` (`r`: stochastic rounding's draws)."""
    return np.clip(w.astype(np.int64) - integer_steps(grad_sum, k, r), W_MIN, W_MAX).astype(np.int8)


def apply_bias_update(b: np.ndarray, grad_sum: np.ndarray, k: np.ndarray) -> np.ndarray:
    """New int32 biases ``sat32(b - steps)``."""
    return np.clip(b.astype(np.int64) - integer_steps(grad_sum, k), B_MIN, B_MAX).astype(np.int32)


def bias_scale(s_x: np.float32, s_w: np.ndarray) -> np.ndarray:
    """float32 ``s_x * s_w[c]``: the scale of the int32 bias."""
    return (np.float32(s_x) * np.asarray(s_w, np.float32)).astype(np.float32)
