"""What an emitted training library is: `TrainSource` and the `model.h` every method shares.

The ZO/BP-QAS and FQT emitters produce the same kind of result and the same public header
(the `model_training.h` template, filled with each method's sizes and notes), and callers (export, run, the
tests) read both without knowing which emitter ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mcutrain.codegen.state_blob import NP_DTYPES, STATE_HEADER_WORDS, STATE_MAGIC, StateEntry
from mcutrain.plan.training import TrainingPlan

CTYPE = {"s8": "int8_t", "u8": "uint8_t", "s16": "int16_t", "s32": "int32_t", "s64": "int64_t",
         "f32": "float"}
"""Schedule dtype -> C element type (of the arena macros `A_<tensor>`)."""


@dataclass
class TrainSource:
    """The generated files and what callers (export, run, tests) need to know about them."""

    header: str
    source: str
    plan: TrainingPlan
    inference_arena_bytes: int
    arena_bytes: int
    const_bytes: int
    ram_weight_bytes: int
    state: list[StateEntry]
    fingerprint: int
    batch: int
    method: str
    options: dict = field(default_factory=dict)

    @property
    def state_bytes(self) -> int:
        return 4 * STATE_HEADER_WORDS + sum(e.nbytes for e in self.state)

    def parse_state(self, blob: bytes) -> dict[str, np.ndarray | int]:
        """A saved state as arrays by name, plus 'steps' and 'rng' (checks magic and fingerprint)."""
        if len(blob) != self.state_bytes:
            raise ValueError(f"state blob has {len(blob)} bytes, expected {self.state_bytes}")
        magic, fp, steps, rng = np.frombuffer(blob[:16], "<u4").tolist()
        if magic != STATE_MAGIC or fp != self.fingerprint:
            raise ValueError("state blob is not from this model (magic or layout fingerprint differ)")
        out: dict[str, np.ndarray | int] = {"steps": steps, "rng": rng}
        off = 16
        for e in self.state:
            out[e.name] = np.frombuffer(blob[off:off + e.nbytes], NP_DTYPES[e.dtype]).reshape(e.shape).copy()
            off += e.nbytes
        return out
