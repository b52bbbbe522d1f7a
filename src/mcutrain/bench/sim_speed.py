"""`sim-speed`: the exact simulator's training steps against PyTorch float32 training of the same graph.

Every row is one method and precision on one architecture and batch: FQT in uint8, mixed,
float32 and int8; ZO (10 queries) by weight, node and mixed perturbation; BP-QAS; mcutrain's
float32 engine (`float`); at batch 1, 8 and 32, on small-cnn and MCUNet-5FPS (128x128, whose
depthwise convolutions and residual adds the PyTorch twin has too: `torch_twin`); and ZO with
two worker processes against PyTorch on two threads. ZO trains MCUNet's last two layers (`all`
would run 10 queries of every one of its 52 layers per step); every other side trains all.

Each measurement is a fresh process (`sim_speed_step`: imports and set-up are not timed, one
warm-up step is not either), and the two sides alternate, mcutrain, torch, mcutrain, torch, ...,
for `rounds` rounds, so both see the same machine. A round's ratio is torch's time over
mcutrain's for the same number of steps of the same batch (> 1: mcutrain is faster); a row
reports the median ratio with its min and max, and the median samples/s of each side. Clock:
process CPU time of the steps on one thread (on a shared machine wall time measures the
neighbours), wall time for the two-process / two-thread rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.bench import files
from mcutrain.bench.sim_speed_step import Side

METHODS: tuple[tuple[str, str], ...] = (
    ("fqt", "uint8"), ("fqt", "mixed"), ("fqt", "float32"), ("fqt", "int8"),
    ("zo", "wp"), ("zo", "np"), ("zo", "mix"), ("bp-qas", "int8"), ("float", "float32"))
"""(method, precision) of every row; zo's precision column is its perturbation mode."""


@dataclass(frozen=True)
class Budget:
    archs: tuple[str, ...] = ("small-cnn", "mcunet-5fps")
    batches: tuple[int, ...] = (1, 8, 32)
    methods: tuple[tuple[str, str], ...] = METHODS
    rounds: int = 5
    samples: int = 320
    """Samples per measurement (steps = samples / batch, at least `min_steps`): every batch size
    measures about the same work."""
    min_steps: int = 3
    mcunet_samples: int = 32
    two_workers: tuple[tuple[str, int], ...] = (("small-cnn", 32),)
    """(arch, batch) of the ZO rows on two worker processes against PyTorch on two threads."""


BUDGET = Budget()
QUICK = Budget(archs=("small-cnn",), batches=(8,), rounds=2, samples=48, min_steps=2,
               methods=(("fqt", "int8"), ("zo", "mix"), ("float", "float32")))
"""`--quick`: three rows and the two-worker row, two rounds (about 2 minutes; the tests run it)."""


BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def steps_for(b: Budget, arch: str, batch: int) -> int:
    samples = b.mcunet_samples if arch == "mcunet-5fps" else b.samples
    return max(b.min_steps, samples // batch)


def run_side(s: Side) -> float:
    """Seconds of one side in a fresh process (`sim_speed_step`), BLAS limited there as asked."""
    threads = str(s.workers if s.side == "torch" else 1)
    env = {**os.environ, **dict.fromkeys(BLAS_THREAD_VARIABLES, threads)}
    src = str(Path(__file__).resolve().parents[2])       # this package, whether installed or not
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, "-m", "mcutrain.bench.sim_speed_step", json.dumps(asdict(s))],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"sim-speed side {asdict(s)} failed:\n{out.stderr[-2000:]}")
    return float(json.loads(out.stdout.splitlines()[-1])["seconds"])


def measure_row(mine: Side, rounds: int, log=print) -> dict[str, Any]:
    """Interleaved rounds of `mine` and its PyTorch twin; the row of the results table."""
    theirs = replace(mine, side="torch")
    t_mine, t_torch = [], []
    for r in range(rounds):
        t_mine.append(run_side(mine))
        t_torch.append(run_side(theirs))
        log(f"sim-speed {mine.arch} {mine.method} {mine.precision} batch {mine.batch} round {r + 1}: "
            f"{t_mine[-1]:.3f} s vs torch {t_torch[-1]:.3f} s")
    ratios = np.asarray(t_torch) / np.asarray(t_mine)
    per_s = mine.batch * mine.steps
    return {"method": mine.method, "precision": mine.precision, "arch": mine.arch, "batch": mine.batch,
            "trainable": mine.trainable, "workers": mine.workers, "clock": mine.clock,
            "samples_per_s": per_s / float(np.median(t_mine)),
            "torch_float_samples_per_s": per_s / float(np.median(t_torch)),
            "ratio": float(np.median(ratios)), "ratio_min": float(ratios.min()),
            "ratio_max": float(ratios.max()), "rounds": rounds, "steps": mine.steps}


def sides(b: Budget) -> list[Side]:
    """Every row's mcutrain side, in table order."""
    out = []
    for arch in b.archs:
        for method, prec in b.methods:
            trainable = "last:2" if (arch, method) == ("mcunet-5fps", "zo") else "all"
            for batch in b.batches:
                out.append(Side("mcutrain", arch, batch, steps_for(b, arch, batch), method, prec, trainable))
    for arch, batch in b.two_workers:
        out.append(Side("mcutrain", arch, batch, steps_for(b, arch, batch), "zo", "mix", workers=2))
    return out


COLUMNS = ["method", "precision", "arch", "batch", "workers", "samples_per_s", "torch_float_samples_per_s",
           "ratio", "ratio_min", "ratio_max"]


def run_speed(work: Path, results: Path, quick: bool = False, log=print, docs: Path = Path("docs")) -> None:
    """Training-step throughput of every method against PyTorch float32, fresh processes, interleaved."""
    b = QUICK if quick else BUDGET
    rows: list[dict[str, Any]] = []
    meta = {"rounds": b.rounds, "clock": "process CPU time, one thread (wall time: rows with 2 workers, "
                                         "against PyTorch on 2 threads)"}
    for s in sides(b):
        rows.append(measure_row(s, b.rounds, log))
        log(f"sim-speed {s.arch} {s.method} {s.precision} batch {s.batch} workers {s.workers}: "
            f"{rows[-1]['ratio']:.3f}x ({rows[-1]['ratio_min']:.3f}-{rows[-1]['ratio_max']:.3f})")
        files.write_results(results, "sim-speed", rows, quick, complete=False, **meta)
    files.write_results(results, "sim-speed", rows, quick, complete=True, **meta)
    if not quick:
        files.update_docs(docs, "sim-speed", files.markdown_table(
            rows, COLUMNS, {"samples_per_s": ".0f", "torch_float_samples_per_s": ".0f", "ratio": ".3f",
                            "ratio_min": ".3f", "ratio_max": ".3f"}))


def register(add) -> None:
    """Hook for `mcutrain.bench`."""
    add("sim-speed", run_speed)
