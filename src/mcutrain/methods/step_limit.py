"""The ZO step limit: no int8 weight moves more than `max_step` int8 steps in one update.

Why: on inputs the pretrained model gets badly wrong (Fashion-MNIST-C impulse noise or
zigzag at severity 5, losses near 5 nats) the node-perturbation estimate of a late layer is
close to the true gradient (cosine 0.96-0.99 with back-propagation's) but that gradient is
large, and the QAS step ``lr * g / s_w^2`` then moves single int8 weights by 20-37 steps in
the first updates. Those updates switch off most of the layer's ReLUs (saturated outputs
60% -> 95% within ten steps); node perturbation leaves saturated outputs unperturbed (the
STE mask), so the dead units get no estimate and never come back. Limiting each weight's
step keeps the direction of small entries and caps the outliers, with no extra memory: the
C runtime applies it inside the fused update (`mt_qas_step_limit_s32`), where a layer-wide
normalization would need the whole layer's gradient before the first weight changes.
Biases are not limited (their steps are in int32 bias units, far finer than a weight's).

The exact rule is `docs/integer-semantics.md` 12.5; measured in `docs/methods.md`.
"""

from __future__ import annotations

import numpy as np

from mcutrain.methods import qas

NO_LIMIT = 254
"""A step of 254 or more saturates any int8 weight in [-127, 127] the same way: the C value of "off"."""


def c_max_step(max_step: int) -> int:
    """The `max_step` argument of the C kernels for a configured limit (0: off)."""
    return NO_LIMIT if max_step <= 0 or max_step > NO_LIMIT else int(max_step)


def limited_steps(grad_sum: np.ndarray, k: np.ndarray, max_step: int,
                  r: np.ndarray | None = None) -> np.ndarray:
    """`qas.integer_steps` (nearest, or stochastic given the draws `r`) clamped to ``+-max_step``
    (int64; 0 or >= 254: unchanged): the limit applies to the rounded step."""
    steps = qas.integer_steps(grad_sum, k, r)
    limit = c_max_step(max_step)
    return steps if limit == NO_LIMIT else np.clip(steps, -limit, limit)


def apply_limited_weight_update(w: np.ndarray, grad_sum: np.ndarray, k: np.ndarray,
                                max_step: int, r: np.ndarray | None = None) -> np.ndarray:
    """New int8 weights ``clamp(w - clamp(steps, +-max_step), -127, 127)`` (`r`: stochastic draws)."""
    steps = limited_steps(grad_sum, k, max_step, r)
    return np.clip(w.astype(np.int64) - steps, qas.W_MIN, qas.W_MAX).astype(np.int8)
