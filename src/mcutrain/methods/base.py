"""The one interface every training method implements, and its saved state.

A method owns its training state (weights, qparams, EMA ranges, RNG state,
optimizer state). `step(x, y, lr)` trains on one batch in place and returns
what happened; `state()` returns everything that changes during training as
JSON-able metadata plus arrays, so a run can be saved and resumed bit-exactly.
State files are untrusted input: `state_file` defines the format (version 2,
integrity digest, bounds) and `check_state` what a method accepts from one.
The training loop (`loop.py`) is shared by all methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.io import atomic_write_bytes
from mcutrain.methods import state_file, state_schema
from mcutrain.methods.state_file import STATE_FORMAT, STATE_VERSION, StateFileError
from mcutrain.qmodel import QuantModel

__all__ = ["STATE_FORMAT", "STATE_VERSION", "StateFileError", "StepStats", "TrainingMethod",
           "load_state", "read_state", "save_state", "verify_state"]


@dataclass
class StepStats:
    """What one `step` did: reported loss, training hits, and the work actually executed."""

    loss: float
    correct: int
    samples: int
    macs: dict[str, int] = field(default_factory=dict)
    """Executed multiply-accumulates per phase: `forward`, `error` (error propagation),
    `weight_grad`; partial updates count only what they really ran."""
    backward_seconds: float = 0.0
    forward_passes: int = 1
    """Forward passes of the batch this step ran (zeroth-order methods run many)."""


class TrainingMethod(ABC):
    """A training method bound to one model and configuration."""

    name: str = "method"

    @abstractmethod
    def step(self, x: np.ndarray, y: np.ndarray, lr: float) -> StepStats:
        """Train on one batch (float32 NHWC inputs, int labels) with learning rate `lr`."""

    @abstractmethod
    def predict(self, x: np.ndarray) -> np.ndarray:
        """Class ids for float32 NHWC inputs, with the model as trained so far."""

    @abstractmethod
    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Everything training changes: (JSON-able metadata, arrays). Copies, not views."""

    @abstractmethod
    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Restore what `state()` returned, exactly."""

    def trained_model(self) -> QuantModel:
        """The int8 model as trained so far: a copy (weights, biases, qparams, rounding, provenance).

        What `mcutrain state-to-model` (and `train -o`) save, so it is the simulator's integers
        exactly, nothing re-quantized. NOTE: the contract of every method; a method that does not
        give its int8 model yet raises NotImplementedError, which callers report to the user.
        """
        raise NotImplementedError(f"method {self.name} cannot give its trained int8 model yet")

    def config(self) -> dict[str, Any]:
        """The method's settings, for reports and provenance."""
        return {"method": self.name}

    def check_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray], max_steps: int) -> list[str]:
        """Problems of a saved state for this method, model and configuration (empty: usable).

        The default accepts exactly what `state()` returns now: the same array
        keys, dtypes and shapes (floats finite) and the same JSON structure.
        Methods override it to allow arrays created during training and to
        bound values (int8 weights, scales > 0, RNG state != 0, step counters
        <= `max_steps`), using the helpers of `state_file`.
        """
        live_meta, live = self.state()
        specs = {k: state_schema.ArraySpec.like(v) for k, v in live.items()}
        return state_schema.check_arrays(arrays, specs) + state_schema.conform(meta, live_meta, "state")


def save_state(path: str | Path, method: TrainingMethod, loop: dict[str, Any],
               run: dict[str, Any] | None = None) -> Path:
    """Write the method's state, the loop's position and the run's fingerprint (atomic, no pickle)."""
    meta, arrays = method.state()
    doc = {"format": STATE_FORMAT, "version": STATE_VERSION, "method": method.config(),
           "state": meta, "loop": loop, "run": run}
    data = state_file.encode_state(doc, arrays)
    atomic_write_bytes(path, lambda f: f.write(data))
    return Path(path)


def read_state(path: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The saved document and arrays after the container, version and digest checks, not applied.

    Raises `StateFileError` (a ValueError) for anything unreadable.
    """
    return state_file.decode_state(path)


def verify_state(doc: dict[str, Any], arrays: dict[str, np.ndarray], method: TrainingMethod,
                 path: str | Path, max_steps: int = state_file.DEFAULT_MAX_STEPS) -> None:
    """Refuse a document whose method settings or state do not fit `method` (StateFileError)."""
    check_method_settings(doc, method, path)
    state_schema.raise_problems(method.check_state(doc["state"], arrays, max_steps), path)


def check_method_settings(doc: dict[str, Any], method: TrainingMethod, path: str | Path) -> None:
    """Refuse a document saved by other method settings, naming each differing setting."""
    from mcutrain.methods.resume import config_differences
    saved, current = doc["method"].get("method"), method.config().get("method")  # doc["method"]: a dict
    if saved != current:
        raise StateFileError(f"'{path}' is a state of method {str(saved)[:40]!r}, not {current!r}: resume "
                             "with the same method settings")
    diff = config_differences(doc["method"], method.config())
    if diff:
        raise StateFileError(f"'{path}' was saved by other method settings ({'; '.join(diff)}): "
                             "resume with the same method settings")


def apply_state(doc: dict[str, Any], arrays: dict[str, np.ndarray], method: TrainingMethod,
                path: str | Path) -> None:
    """`method.load_state` of a verified document; any refusal of the method becomes a StateFileError."""
    try:
        method.load_state(doc["state"], arrays)
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise StateFileError(f"'{path}' could not be applied to the method ({type(e).__name__}: {e}); "
                             "the method may be half-restored, start it anew") from None


def load_state(path: str | Path, method: TrainingMethod,
               max_steps: int = state_file.DEFAULT_MAX_STEPS) -> dict[str, Any]:
    """Restore `method` from `path`; returns the loop position. Refuses a mismatched or invalid state."""
    doc, arrays = read_state(path)
    verify_state(doc, arrays, method, path, max_steps)
    apply_state(doc, arrays, method, path)
    return doc["loop"]
