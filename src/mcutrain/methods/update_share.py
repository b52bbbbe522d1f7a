"""The share of integer weights one training step changes: do the updates round to nothing?

QAS-scaled SGD (`qas`) rounds every update to a whole number of weight steps, so a small
rate or gradient moves no int8 weight at all (only the int32 biases, whose steps are much
finer). `UpdateShare` measures it in any method's loop without knowing the method: before
a step it keeps a copy of the integer weight tensors the method trains (the `w/<layer>`
arrays of its `state()` with an integer dtype, of the layers its `StepDecisions` train:
int8 for zo, bp-qas and fqt int8, uint8 for fqt uint8 and mixed; float weights are not
counted), after the step it counts the entries that
differ. The result is the mean over steps of each layer's changed fraction, and overall
the mean over steps of (changed entries / entries) over all those layers together.

Example:
    >>> share = UpdateShare()
    >>> share.before(method); method.step(x, y, lr); share.after(method)
    >>> share.result()        # {"overall": 0.0123, "layers": {"conv1": 0.02, ...}} or None
"""

from __future__ import annotations

from typing import Any

import numpy as np


def integer_weights(method: Any) -> dict[str, np.ndarray]:
    """The integer weight tensors `method` trains, by layer (copies, from its `state()`): the
    layers its `decisions.weight_layers` name (a state may also keep frozen layers' weights)."""
    _, arrays = method.state()
    trained = getattr(getattr(method, "decisions", None), "weight_layers", None)
    return {k[2:]: v for k, v in arrays.items() if k.startswith("w/") and v.dtype.kind in "iu"
            and (trained is None or k[2:] in trained)}


class UpdateShare:
    """Accumulates, step by step, the fraction of integer weights each step changed."""

    def __init__(self) -> None:
        self.steps = 0
        self.fraction_sum: dict[str, float] = {}
        self.overall_sum = 0.0
        self._before: dict[str, np.ndarray] = {}

    def before(self, method: Any) -> None:
        """Keep the weights as they are before a step."""
        self._before = integer_weights(method)

    def after(self, method: Any) -> None:
        """Count the entries the step changed (after `before`)."""
        now = integer_weights(method)
        if not self._before:
            return
        total = changed = 0
        for name, old in self._before.items():
            n = int(np.count_nonzero(now[name] != old))
            self.fraction_sum[name] = self.fraction_sum.get(name, 0.0) + n / old.size
            total += old.size
            changed += n
        self.overall_sum += changed / total
        self.steps += 1
        self._before = {}

    def result(self) -> dict[str, Any] | None:
        """`{"overall": f, "layers": {layer: f}}`, means over the steps counted; None if none were
        (no step ran, or the method trains no integer weights)."""
        if not self.steps:
            return None
        return {"overall": self.overall_sum / self.steps,
                "layers": {k: v / self.steps for k, v in self.fraction_sum.items()}}
