"""Sparse ZO training: which layers train, chosen by a ZO score or by test-and-pick.

Zhao et al. (TODAES 2025) train only a few layers. Two selection rules:

- `select_by_score`: one ZO estimate per candidate layer (no update), ranked
  by the relative gradient norm ``||G / s_w|| / ||W s_w||`` (G the gradient
  of the integer weight, so ``G / s_w`` is the float gradient and ``W s_w``
  the float weight): layers whose weights would move most, relatively.
- `select_by_test`: "test-and-pick": one ZO step per candidate from the same
  model, keep the k candidates with the lowest validation loss afterwards.

Both are deterministic given the config's seed.

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.engines import ptq
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((20, 8, 8, 1), dtype=np.float32); y = rng.integers(0, 10, 20)
    >>> qm = ptq.quantize_model(zoo.build("digits-cnn"), x)
    >>> len(select_by_score(qm, x, y, ["conv1", "conv2", "fc"], k=2, config=ZOConfig(queries=4)))
    2
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mcutrain.engines import int_engine
from mcutrain.methods import zo_estimator as est
from mcutrain.methods.zo import ZOConfig, ZOMethod
from mcutrain.qmodel import QuantModel


def relative_gradient_norm(qm: QuantModel, layer: str, grad: est.IntGrad) -> float:
    """``||G / s_w|| / ||W s_w||`` of one layer's weight (float64, for ranking only)."""
    w = qm.weights[layer].astype(np.float64)
    s = np.broadcast_to(qm.weight_qparams[layer].scale, (w.shape[0],)).astype(np.float64)
    shape = (-1,) + (1,) * (w.ndim - 1)
    g = grad.w_grad() / s.reshape(shape)
    wn = np.linalg.norm(w * s.reshape(shape))
    return float(np.linalg.norm(g) / wn) if wn > 0 else 0.0


def _check(candidates: list[str], k: int) -> None:
    if not 1 <= k <= len(candidates):
        raise ValueError(f"cannot pick {k} of {len(candidates)} candidate layers")


def select_by_score(qm: QuantModel, x: np.ndarray, y: np.ndarray, candidates: list[str], k: int,
                    config: ZOConfig | None = None) -> list[str]:
    """The k candidates with the largest ZO relative gradient norm, in graph order."""
    _check(candidates, k)
    cfg = config or ZOConfig()
    scores = {}
    for name in candidates:
        m = ZOMethod(qm, replace(cfg, trainable=f"layers:{name}"))
        grads, _ = m.estimate(x, np.asarray(y))
        scores[name] = relative_gradient_norm(qm, name, grads[name])
    best = sorted(candidates, key=lambda n: -scores[n])[:k]
    return [n for n in candidates if n in best]


def validation_loss(qm: QuantModel, x: np.ndarray, y: np.ndarray) -> int:
    """Sum of the integer Q16 losses over (x, y): an exact, fine-grained comparison."""
    logits = int_engine.forward(qm, int_engine.quantize_input(qm, x))
    return int(est.per_sample_loss(qm, logits, np.asarray(y)).sum())


def select_by_test(qm: QuantModel, x: np.ndarray, y: np.ndarray, x_val: np.ndarray,
                   y_val: np.ndarray, candidates: list[str], k: int, lr: float,
                   config: ZOConfig | None = None) -> list[str]:
    """Test-and-pick: the k candidates whose single ZO step lowers the validation loss most."""
    _check(candidates, k)
    cfg = config or ZOConfig()
    after = {}
    for name in candidates:
        m = ZOMethod(qm, replace(cfg, trainable=f"layers:{name}"))
        m.step(x, np.asarray(y), lr)
        after[name] = validation_loss(m.qm, x_val, y_val)
    best = sorted(candidates, key=lambda n: after[n])[:k]
    return [n for n in candidates if n in best]
