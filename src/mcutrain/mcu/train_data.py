"""The data file `harness/train_main.c` reads and the result file it writes (host and QEMU runs).

Layouts (little-endian):
    data:   magic 'MTTD', steps, batch, input size, lr (float32 bits); per step
            inputs int8 [batch * input size], labels int32 [batch]
    result: per step losses int32 [batch], logits int8 [batch * classes], state [MODEL_STATE_BYTES]

Example:
    >>> write_train_data(path, batches, lr=0.05)                          # doctest: +SKIP
    >>> steps = read_train_results(results, src, steps=1, num_classes=10)  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mcutrain.io import atomic_write_bytes

DATA_MAGIC = 0x4454544D
"""'MTTD' little-endian (the C text repeats it as `DATA_MAGIC`)."""


def write_train_data(path: str | Path, batches: list[tuple[np.ndarray, np.ndarray]], lr: float) -> None:
    """The data file of `harness/train_main.c`: int8 batches (B, ...) with their labels."""
    bsz = len(batches[0][1])
    in_size = int(np.prod(batches[0][0].shape[1:]))
    parts = [np.array([DATA_MAGIC, len(batches), bsz, in_size], "<u4").tobytes(),
             np.array([lr], "<f4").tobytes()]
    for x_q, y in batches:
        if len(y) != bsz or x_q.shape[0] != bsz:
            raise ValueError(f"every batch must hold {bsz} samples")
        parts += [np.ascontiguousarray(x_q, np.int8).tobytes(), np.asarray(y, "<i4").tobytes()]
    atomic_write_bytes(Path(path), lambda f: f.write(b"".join(parts)))


@dataclass
class TrainStepResult:
    """What the C library reported after one step."""

    losses: np.ndarray             # (B,) int32 Q16, before the update
    logits: np.ndarray             # (B, K) int8, before the update
    state: dict                    # TrainSource.parse_state: tensors by name, 'steps', 'rng'
    blob: bytes = b""
    """The state as `model_save_state` wrote it (what `mcutrain state-to-model` takes)."""


def read_train_results(path: str | Path, src, steps: int, num_classes: int) -> list[TrainStepResult]:
    """Parse the harness's result file (`src` is the library's `TrainSource`)."""
    raw = Path(path).read_bytes()
    b = src.batch
    per = 4 * b + b * num_classes + src.state_bytes
    if len(raw) != steps * per:
        raise RuntimeError(f"the training harness wrote {len(raw)} bytes, expected {steps} steps x {per}")
    out = []
    for i in range(steps):
        chunk = raw[i * per:(i + 1) * per]
        losses = np.frombuffer(chunk[:4 * b], "<i4").copy()
        logits = np.frombuffer(chunk[4 * b:4 * b + b * num_classes], np.int8).reshape(b, num_classes).copy()
        blob = chunk[4 * b + b * num_classes:]
        out.append(TrainStepResult(losses, logits, src.parse_state(blob), blob))
    return out
