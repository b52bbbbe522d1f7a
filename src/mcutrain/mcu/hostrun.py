"""Run host-built harnesses contained and read what they wrote back as arrays.

Example:
    >>> logits, _ = run_host(exe, x_q, num_classes=10)                     # doctest: +SKIP
    >>> steps = run_host_train(exe, batches, 0.05, src, num_classes=10)    # doctest: +SKIP
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from mcutrain.contain import private_dir, run_program
from mcutrain.mcu.hostbuild import HostBuildError
from mcutrain.mcu.train_data import TrainStepResult, read_train_results, write_train_data


def run_harness(exe: str | Path, args: list[str], run_dir: Path,
                timeout: float) -> subprocess.CompletedProcess:
    """Run a host harness contained (mcutrain.contain.run_program); its failures as HostBuildError.

    Shared by the inference and training harnesses, so both get the same private directory,
    scrubbed environment, network namespace, unprivileged user and clean-up on timeout.
    """
    name = Path(exe).name
    try:
        r = run_program(exe, args, run_dir, timeout)
    except subprocess.TimeoutExpired:
        raise HostBuildError(f"{name} did not exit within {timeout:g} s; raise the timeout or look for an "
                             "endless loop in the generated code") from None
    if r.returncode != 0:
        out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        raise HostBuildError(f"{name} exited with {r.returncode}:\n{out}\n{err}")
    return r


def run_host(exe: str | Path, x_q: np.ndarray, num_classes: int, layer_sizes: list[int] | None = None,
             timeout: float = 120.0) -> tuple[np.ndarray, list[np.ndarray] | None]:
    """Run the harness on int8 samples (N, ...); returns logits (N, K) and, if asked, the layers.

    `layer_sizes` (bytes per layer, in layer order) turns on the per-layer dump; the result is
    one (N, size) array per layer.
    """
    x_q = np.ascontiguousarray(x_q, dtype=np.int8)
    n = len(x_q)
    with private_dir("mt-host-") as d:
        fin, fout, flay = d / "in.bin", d / "out.bin", d / "layers.bin"
        fin.write_bytes(x_q.tobytes())
        args = ["in.bin", "out.bin"] + (["layers.bin"] if layer_sizes else [])
        run_harness(exe, args, d, timeout)
        logits = np.frombuffer(fout.read_bytes(), np.int8).reshape(n, num_classes)
        if not layer_sizes:
            return logits, None
        raw = np.frombuffer(flay.read_bytes(), np.int8).reshape(n, sum(layer_sizes))
        splits = np.cumsum(layer_sizes)[:-1]
        return logits, [a.copy() for a in np.split(raw, splits, axis=1)]


def run_host_train(exe: str | Path, batches: list[tuple[np.ndarray, np.ndarray]], lr: float, src,
                   num_classes: int, timeout: float = 300.0) -> list[TrainStepResult]:
    """Run the host training harness on int8 batches; the per-step results."""
    with private_dir("mt-train-") as d:
        write_train_data(d / "data.bin", batches, lr)
        run_harness(exe, ["data.bin", "results.bin"], d, timeout)
        return read_train_results(d / "results.bin", src, len(batches), num_classes)
