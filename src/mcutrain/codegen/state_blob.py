"""The saved training state of a generated library: its header, entries and C save/load code.

Every training library (ZO, BP-QAS and FQT alike) saves the same kind of blob: four uint32
header words (magic, layout fingerprint, step counter, RNG state) then its state entries in
order. The Python side reads it back (`TrainSource.parse_state`) and the C side writes it
(the `state_io.c` template, filled with each library's entries), so the format has one
home, below every emitter.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

STATE_MAGIC = 0x5453544D
"""'MTST' little-endian: the first word of a saved training state."""


@dataclass
class StateEntry:
    """One tensor of the saved training state, in blob order."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(NP_DTYPES[self.dtype]).itemsize


NP_DTYPES = {"s8": "<i1", "u8": "<u1", "s32": "<i4", "f32": "<f4"}
STATE_HEADER_WORDS = 4
"""magic, layout fingerprint, step counter, RNG state (uint32 each)."""




def state_fingerprint(entries: list[StateEntry], method: str, batch: int) -> int:
    """The layout word of a state blob: a CRC of the method, batch and entries in order."""
    text = f"{method};{batch};" + ";".join(f"{e.name}:{e.dtype}:{e.shape}" for e in entries)
    return zlib.crc32(text.encode()) & 0xFFFFFFFF
