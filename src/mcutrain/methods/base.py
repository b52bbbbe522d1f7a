"""The one interface every training method implements, and its saved state.

A method owns its training state (weights, qparams, EMA ranges, RNG state,
optimizer state). `step(x, y, lr)` trains on one batch in place and returns
what happened; `state()` returns everything that changes during training as
JSON-able metadata plus arrays, so a run can be saved and resumed bit-exactly.
The training loop (`loop.py`) is shared by all methods.
"""

from __future__ import annotations

import io as _io
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.io import atomic_write_bytes

STATE_FORMAT = "mcutrain-training-state"
STATE_VERSION = 1


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

    def config(self) -> dict[str, Any]:
        """The method's settings, for reports and provenance."""
        return {"method": self.name}


def save_state(path: str | Path, method: TrainingMethod, loop: dict[str, Any]) -> Path:
    """Write the method's state and the loop's position to `path` (.npz, atomic, no pickle)."""
    meta, arrays = method.state()
    doc = {"format": STATE_FORMAT, "version": STATE_VERSION, "method": method.config(),
           "state": meta, "loop": loop}
    payload = {f"a/{k}": v for k, v in arrays.items()}
    payload["__meta__"] = np.frombuffer(json.dumps(doc).encode(), np.uint8)
    buf = _io.BytesIO()
    np.savez(buf, **payload)
    atomic_write_bytes(path, lambda f: f.write(buf.getvalue()))
    return Path(path)


def read_state(path: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The saved document and arrays of a training state file, without applying them."""
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        doc = json.loads(data.pop("__meta__").tobytes())
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"'{path}' is not a readable training state ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT or doc.get("version") != STATE_VERSION:
        raise ValueError(f"'{path}' is not an mcutrain training state of version {STATE_VERSION}")
    return doc, {k[2:]: v for k, v in data.items() if k.startswith("a/")}


def load_state(path: str | Path, method: TrainingMethod) -> dict[str, Any]:
    """Restore `method` from `path`; returns the loop position. Refuses a mismatched method."""
    doc, arrays = read_state(path)
    if doc["method"] != method.config():
        raise ValueError(f"'{path}' was saved by {doc['method']}, not {method.config()}: "
                         "resume with the same method settings")
    method.load_state(doc["state"], arrays)
    return doc["loop"]
