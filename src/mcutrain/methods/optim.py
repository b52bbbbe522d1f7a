"""Float optimizers (SGD with momentum, Adam) and the cosine learning-rate schedule.

An optimizer updates a dict of float32 arrays in place, keyed like
`Graph.arrays()` ('<node>.<param>'), so the graph's own parameters are what
change. The update formulas follow PyTorch's `torch.optim.SGD` and
`torch.optim.Adam` (same operation order; the tests compare several steps
against them), so a float baseline here means the same as one there. The
learning rate is passed to every `step`, so the schedule stays the training
loop's business; `state()`/`load_state()` make a run resumable exactly.

Example:
    >>> p = {"fc.weight": np.ones(3, np.float32)}
    >>> opt = make_optimizer("sgd", momentum=0.9)
    >>> opt.step(p, {"fc.weight": np.ones(3, np.float32)}, lr=0.1)
    >>> p["fc.weight"]
    array([0.9, 0.9, 0.9], dtype=float32)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mcutrain.methods.loop import cosine_lr
from mcutrain.methods.state_schema import ArraySpec, conform, int_in

__all__ = ["SGD", "Adam", "Optimizer", "cosine_lr", "make_optimizer"]
# NOTE: the cosine schedule lives with the shared training loop; it is re-exported here
# so that optimizers and their schedule can be imported from one place.


class Optimizer(ABC):
    """Updates parameters in place from their gradients; keeps its own per-parameter state."""

    name: str = "optimizer"

    @abstractmethod
    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray], lr: float) -> None:
        """Apply one update to every `params[k]` that has a `grads[k]`, in place."""

    @abstractmethod
    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able metadata, arrays): everything needed to continue exactly. Copies."""

    @abstractmethod
    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Restore what `state()` returned."""

    @abstractmethod
    def config(self) -> dict[str, Any]:
        """Hyperparameters, for provenance and for refusing to resume with other settings."""

    def state_specs(self, params: dict[str, np.ndarray]) -> dict[str, ArraySpec]:
        """The arrays a saved state may hold for `params` (created at the first step: optional)."""
        return {}

    def check_state(self, meta: Any, arrays: dict[str, np.ndarray], max_steps: int) -> list[str]:
        """Problems of a saved optimizer state (arrays already checked against `state_specs`)."""
        return conform(meta, self.state()[0], "state.optimizer")


def _check(params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
    missing = sorted(set(grads) - set(params))
    if missing:
        raise KeyError(f"gradients for unknown parameters {missing}; known: {sorted(params)}")
    for k, g in grads.items():
        if g.shape != params[k].shape:
            raise ValueError(f"gradient of '{k}' has shape {g.shape}, parameter {params[k].shape}")


@dataclass
class SGD(Optimizer):
    """SGD with momentum, as torch.optim.SGD (dampening 0).

    d = g + weight_decay * p;  buf = d on the first step, else momentum * buf + d;
    p -= lr * (d + momentum * buf if nesterov else buf).
    """

    momentum: float = 0.9
    weight_decay: float = 0.0
    nesterov: bool = False
    buffers: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    name: str = field(default="sgd", init=False)

    def step(self, params, grads, lr):
        _check(params, grads)
        for k, g in grads.items():
            p = params[k]
            d = g + self.weight_decay * p if self.weight_decay else g
            if self.momentum:
                buf = self.buffers.get(k)
                if buf is None:
                    buf = self.buffers[k] = np.array(d, dtype=p.dtype)
                else:
                    buf *= self.momentum
                    buf += d
                d = d + self.momentum * buf if self.nesterov else buf
            p -= lr * d

    def state(self):
        return {}, {f"momentum/{k}": v.copy() for k, v in self.buffers.items()}

    def load_state(self, meta, arrays):
        self.buffers = {k.split("/", 1)[1]: v.copy() for k, v in arrays.items()
                        if k.startswith("momentum/")}

    def state_specs(self, params):
        if not self.momentum:
            return {}
        return {f"momentum/{k}": ArraySpec(p.dtype, p.shape, required=False, group="momentum")
                for k, p in params.items()}

    def config(self):
        return {"optimizer": self.name, "momentum": self.momentum,
                "weight_decay": self.weight_decay, "nesterov": self.nesterov}


@dataclass
class Adam(Optimizer):
    """Adam (Kingma & Ba, ICLR 2015, arXiv 1412.6980) in torch.optim.Adam's operation order.

    With L2 weight decay added to the gradient (torch's `Adam(weight_decay=...)`,
    not the decoupled AdamW).
    """

    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0
    t: int = 0
    m: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    v: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    name: str = field(default="adam", init=False)

    def step(self, params, grads, lr):
        _check(params, grads)
        self.t += 1
        c1 = 1 - self.beta1 ** self.t
        c2_sqrt = (1 - self.beta2 ** self.t) ** 0.5
        for k, g in grads.items():
            p = params[k]
            if self.weight_decay:
                g = g + self.weight_decay * p
            if k not in self.m:
                self.m[k], self.v[k] = np.zeros_like(p), np.zeros_like(p)
            m, v = self.m[k], self.v[k]
            m += (1 - self.beta1) * (g - m)               # torch: exp_avg.lerp_(grad, 1 - beta1)
            v *= self.beta2
            v += (1 - self.beta2) * (g * g)
            denom = np.sqrt(v)
            denom /= c2_sqrt
            denom += self.eps
            p -= (lr / c1) * (m / denom)

    def state(self):
        arrays = {f"m/{k}": a.copy() for k, a in self.m.items()}
        arrays |= {f"v/{k}": a.copy() for k, a in self.v.items()}
        return {"t": self.t}, arrays

    def load_state(self, meta, arrays):
        self.t = int(meta["t"])
        self.m = {k[2:]: a.copy() for k, a in arrays.items() if k.startswith("m/")}
        self.v = {k[2:]: a.copy() for k, a in arrays.items() if k.startswith("v/")}

    def state_specs(self, params):
        specs = {f"m/{k}": ArraySpec(p.dtype, p.shape, required=False, group="moments")
                 for k, p in params.items()}
        return specs | {f"v/{k}": ArraySpec(p.dtype, p.shape, lo=0.0, required=False, group="moments")
                        for k, p in params.items()}

    def check_state(self, meta, arrays, max_steps):
        problems = conform(meta, self.state()[0], "state.optimizer")
        if problems:
            return problems
        problems = int_in(meta["t"], 0, max_steps, "state.optimizer.t")
        if (meta["t"] > 0) != bool(arrays):
            problems.append("state.optimizer.t and the presence of the Adam moments disagree")
        return problems

    def config(self):
        return {"optimizer": self.name, "beta1": self.beta1, "beta2": self.beta2, "eps": self.eps,
                "weight_decay": self.weight_decay}


OPTIMIZERS = {"sgd": SGD, "adam": Adam}


def make_optimizer(name: str, **kwargs: Any) -> Optimizer:
    """An optimizer by name ('sgd' or 'adam') with its hyperparameters."""
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer '{name}'; available: {', '.join(OPTIMIZERS)}")
    try:
        return OPTIMIZERS[name](**kwargs)
    except TypeError as e:
        raise ValueError(f"bad settings for optimizer '{name}': {e}") from None
