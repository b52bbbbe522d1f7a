"""The file-driven training driver of a generated library, its data files, and host builds of it.

`harness/train_main.c` reads a data file (header, then per step MODEL_TRAIN_BATCH samples
in the library's input format (int8; uint8 for fqt uint8/mixed; float32 bytes for fqt float32) and
int32 labels) and writes per step the losses, the logits and the saved training state
(`model_save_state`), so a test or `mcutrain run` compares every trainable tensor, the RNG state
and the step counter with the simulator after every step. On the emulated boards (`MT_BOARD`)
each `model_train_step` sits between the instruction-count markers, and the driver prints the
stack high-water mark (`mt_stack_used`) at the end.

Layouts (little-endian):
    data:   magic 'MTTD', steps, batch, input size, lr (float32 bits); per step
            inputs int8 [batch * input size], labels int32 [batch]
    result: per step losses int32 [batch], logits int8 [batch * classes], state [MODEL_STATE_BYTES]

Example:
    >>> write_train_data(path, batches, lr=0.05)                          # doctest: +SKIP
    >>> exe = build_host_train(lib_dir, tmp_path / "train")                # doctest: +SKIP
    >>> steps = run_host_train(exe, path, src, num_classes=10)             # doctest: +SKIP
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mcutrain.buildflags import (
    C_STD_FLAGS,
    HOST_CHECK_FLAGS,
    HOST_OPT,
    HOST_SANITIZE,
    TRAIN_FLAGS,
    host_kernel_flags,
)
from mcutrain.codegen.harness import HostBuildError, find_host_cc, run_harness, runtime_objects

DATA_MAGIC = 0x4454544D
"""'MTTD' little-endian."""

def write_train_data(path: str | Path, batches: list[tuple[np.ndarray, np.ndarray]], lr: float) -> None:
    """The data file of `harness/train_main.c`: int8 batches (B, ...) with their labels."""
    from mcutrain.io import atomic_write_bytes

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
        out.append(TrainStepResult(losses, logits, src.parse_state(chunk[4 * b + b * num_classes:])))
    return out


def build_host_train(lib_dir: str | Path, exe: str | Path, sanitize: bool = True, kernels: str = "ref",
                     opt: str = HOST_OPT) -> Path:
    """Compile a generated training library and its harness with the host gcc (ASan + UBSan)."""
    lib = Path(lib_dir)
    cc = find_host_cc()
    flags = [*C_STD_FLAGS, *TRAIN_FLAGS, *HOST_CHECK_FLAGS, opt, f"-I{lib / 'runtime'}",
             *host_kernel_flags(kernels)]
    flags += HOST_SANITIZE if sanitize else []
    objs = runtime_objects(cc, lib / "runtime", flags)
    cmd = [cc, *flags, f"-I{lib}", str(lib / "model.c"), str(lib / "harness" / "train_main.c"),
           *map(str, objs), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise HostBuildError(f"host build failed ({' '.join(cmd)}):\n{r.stderr}")
    return Path(exe)


def run_host_train(exe: str | Path, batches: list[tuple[np.ndarray, np.ndarray]], lr: float, src,
                   num_classes: int, timeout: float = 300.0) -> list[TrainStepResult]:
    """Run the host harness on int8 batches; the per-step results."""
    from mcutrain.contain import private_dir

    with private_dir("mt-train-") as d:
        write_train_data(d / "data.bin", batches, lr)
        run_harness(exe, ["data.bin", "results.bin"], d, timeout)
        return read_train_results(d / "results.bin", src, len(batches), num_classes)
