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
        """A saved state as arrays by name, plus 'steps' and 'rng'.

        The blob is untrusted (a file from a device): a short, foreign, other-library or
        wrong-size blob raises ValueError saying which, checked in that order so a blob of
        another configuration is named as such even when its size differs too.
        """
        head = 4 * STATE_HEADER_WORDS
        if len(blob) < head:
            raise ValueError(f"the state has {len(blob)} bytes, fewer than its {head}-byte header: "
                             "it is truncated; save it again with model_save_state")
        magic, fp, steps, rng = np.frombuffer(blob[:head], "<u4").tolist()
        if magic != STATE_MAGIC:
            raise ValueError(f"not a saved training state: it starts with 0x{magic:08X}, not the magic "
                             f"0x{STATE_MAGIC:08X} ('MTST') that model_save_state writes")
        if fp != self.fingerprint:
            raise ValueError(f"this state was written by a different library/configuration (layout "
                             f"fingerprint 0x{fp:08X}, this library's is 0x{self.fingerprint:08X}): use "
                             "the library folder the device was built from")
        if len(blob) != self.state_bytes:
            what = "it is truncated" if len(blob) < self.state_bytes else "it has extra bytes at the end"
            raise ValueError(f"the state has {len(blob)} bytes, this library's has {self.state_bytes}: "
                             f"{what}; save exactly MODEL_STATE_BYTES bytes")
        out: dict[str, np.ndarray | int] = {"steps": steps, "rng": rng}
        off = head
        for e in self.state:
            out[e.name] = np.frombuffer(blob[off:off + e.nbytes], NP_DTYPES[e.dtype]).reshape(e.shape).copy()
            off += e.nbytes
        return out
