"""Throughput of a float training step: mcutrain's float engine vs PyTorch on the same graph.

One training step = forward, softmax cross-entropy, backward, Adam update, on
`small-cnn` (28x28x1, batch 64) by default. Both sides start from the same
weights and see the same batch. The sides run alternately, several rounds,
so that drift in the load of a shared machine hits both alike; each round
times a few steps per side, and the table reports the median samples/s per
side and the median of the per-round ratios against PyTorch with
`torch.set_num_threads(2)` (NCHW, its native layout) and with one thread. PyTorch with one thread
and the numpy engine with its BLAS limited to 1 and to 2 threads (via
threadpoolctl) are further sides: on a loaded machine, spinning worker
threads can make 2 threads far slower than 1. Unless `--default-malloc`,
the process first calls `mcutrain.allocator.keep_freed_memory()` (as
`mcutrain pretrain` does), which applies to both sides alike.

Run: ``mcutrain bench float-speed`` (small-cnn, batch 64, 9 rounds of 5 steps per side, the
settings of the committed result) writes `benchmarks/results/float-speed.json`; ``--quick``
(batch 8, 2 rounds of 1 step) writes `float-speed.quick.json`. The benchmark has no docs block:
README.md quotes its figure. PyTorch (the dev extra) is imported only when the benchmark runs.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from mcutrain import __version__, zoo
from mcutrain.allocator import keep_freed_memory
from mcutrain.bench import files
from mcutrain.engines.float_engine import forward
from mcutrain.graph import INPUT, Graph, Op
from mcutrain.methods.float import FloatMethod


@dataclass(frozen=True)
class Settings:
    """What one run measures (the old script's options, without the output path)."""

    arch: str = "small-cnn"
    batch: int = 64
    rounds: int = 9
    steps: int = 5
    lr: float = 1e-3
    default_malloc: bool = False
    """Leave glibc's malloc settings alone (see `mcutrain.allocator.keep_freed_memory`)."""


FULL = Settings()
QUICK = Settings(batch=8, rounds=2, steps=1)


def torch_twin(graph: Graph):
    """The same graph in PyTorch, NCHW: (parameters, forward), OIHW weights copied from the OHWI ones."""
    import torch
    import torch.nn.functional as F

    weights = torch.nn.ParameterDict()
    for n in graph.parametric():
        w = n.params["weight"]
        w = w.transpose(0, 3, 1, 2) if w.ndim == 4 else w
        key = n.name.replace(".", "_")
        weights[key + "_w"] = torch.nn.Parameter(torch.tensor(np.ascontiguousarray(w)))
        weights[key + "_b"] = torch.nn.Parameter(torch.tensor(n.params["bias"]))

    def twin(x: torch.Tensor) -> torch.Tensor:
        t = {INPUT: x}
        for n in graph.nodes:
            a, src = n.attrs, [t[s] for s in n.inputs]
            key = n.name.replace(".", "_")
            if n.op == Op.CONV2D:
                pt, pb, pl, pr = a["padding"]
                if pt == pb and pl == pr:   # torch's own (symmetric) padding: no extra copy
                    xin, pad = src[0], (pt, pl)
                else:
                    xin, pad = F.pad(src[0], (pl, pr, pt, pb)), (0, 0)
                y = F.conv2d(xin, weights[key + "_w"], weights[key + "_b"], stride=a["stride"],
                             padding=pad, groups=a["groups"])
            elif n.op == Op.LINEAR:
                y = F.linear(src[0], weights[key + "_w"], weights[key + "_b"])
            elif n.op == Op.RELU:
                y = F.relu(src[0])
            elif n.op == Op.RELU6:
                y = F.relu6(src[0])
            elif n.op == Op.MAXPOOL:
                y = F.max_pool2d(src[0], a["kernel"], a["stride"])
            elif n.op == Op.AVGPOOL:
                y = F.avg_pool2d(src[0], a["kernel"], a["stride"])
            elif n.op == Op.GLOBAL_AVGPOOL:
                y = src[0].mean((2, 3), keepdim=True)
            elif n.op == Op.FLATTEN:
                y = src[0].permute(0, 2, 3, 1).reshape(src[0].shape[0], -1)
            elif n.op == Op.ADD:
                y = src[0] + src[1]
            else:
                raise ValueError(f"no torch twin for op {n.op.value}")
            if n.act == "relu":
                y = F.relu(y)
            elif n.act == "relu6":
                y = F.relu6(y)
            t[n.name] = y
        return t[graph.output]

    return weights, twin


def make_sides(arch: str, batch: int, lr: float):
    """Callables that each run one training step of the same model on the same batch."""
    import torch
    import torch.nn.functional as F

    graph = zoo.build(arch, 10, seed=0)
    rng = np.random.default_rng(0)
    x = rng.random((batch, *graph.input_shape), dtype=np.float32)
    y = rng.integers(0, 10, batch)
    method = FloatMethod(graph.copy(), "adam")
    weights, twin = torch_twin(graph)
    opt = torch.optim.Adam(weights.parameters(), lr=lr)
    tx, ty = torch.tensor(x.transpose(0, 3, 1, 2).copy()), torch.tensor(y)
    with torch.no_grad():   # the same model on both sides, checked before anything is timed
        gap = np.abs(twin(tx).numpy() - forward(graph, x)).max()
    if gap > 1e-4:
        raise AssertionError(f"torch twin and float engine disagree: max |logit difference| {gap}")

    def ours() -> None:
        method.step(x, y, lr)

    def theirs() -> None:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(twin(tx), ty)
        loss.backward()
        opt.step()

    return graph, ours, theirs


def timed(step, steps: int, blas_threads: int | None = None,
          torch_threads: int | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds per step over `steps` steps after one warm-up step.

    CPU time sums all threads; for a one-thread side it is what the step costs
    when the machine is shared, whatever the wall clock says.
    """
    if torch_threads is not None:
        import torch
        torch.set_num_threads(torch_threads)
    with threadpool_limits(blas_threads, "blas"):
        step()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps


def measure(s: Settings, log) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows (one per side) and the result file's other keys, as the script wrote them."""
    import torch

    malloc_tuned = False if s.default_malloc else keep_freed_memory()
    graph, ours, theirs = make_sides(s.arch, s.batch, s.lr)
    sides = {"mcutrain float engine, BLAS 1 thread": lambda: timed(ours, s.steps, blas_threads=1),
             "mcutrain float engine, BLAS 2 threads": lambda: timed(ours, s.steps, blas_threads=2),
             "pytorch 2 threads": lambda: timed(theirs, s.steps, torch_threads=2),
             "pytorch 1 thread": lambda: timed(theirs, s.steps, torch_threads=1)}
    secs: dict[str, list[float]] = {k: [] for k in sides}
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    for r in range(s.rounds):
        for name, run in sides.items():
            wall, used = run()
            secs[name].append(wall)
            cpu[name].append(used)
        log(f"round {r + 1}/{s.rounds}: " + ", ".join(
            f"{k}: {s.batch / v[-1]:.0f}/s" for k, v in secs.items()))
    ref = "pytorch 2 threads"
    rows = []
    for name, t in secs.items():
        ratios = [b / a for a, b in zip(t, secs[ref])]   # >1: faster than torch
        ratios_1t = [b / a for a, b in zip(t, secs["pytorch 1 thread"])]
        rows.append({"engine": name, "arch": s.arch, "batch": s.batch,
                     "samples_per_s": round(s.batch / statistics.median(t), 1),
                     "ms_per_step": round(1e3 * statistics.median(t), 2),
                     "cpu_ms_per_step": round(1e3 * statistics.median(cpu[name]), 2),
                     "speed_vs_pytorch": round(statistics.median(ratios), 3),
                     "speed_vs_pytorch_1_thread": round(statistics.median(ratios_1t), 3),
                     "rounds": s.rounds, "steps_per_round": s.steps})
    extra = {"step": "forward + softmax cross-entropy + backward + Adam update",
             "macs_per_sample": graph.total_macs(), "mcutrain": __version__, "torch": torch.__version__,
             "numpy": np.__version__, "malloc_keeps_freed_memory": malloc_tuned,
             "machine": platform.machine(), "cpus": os.cpu_count(),
             "load_average_1min": round(os.getloadavg()[0], 2)}
    return rows, extra


def run_float_speed(work: Path, results: Path, quick: bool, log, docs: Path) -> None:
    """Float training step: mcutrain's float engine vs PyTorch (samples/s, one and two threads)."""
    rows, extra = measure(QUICK if quick else FULL, log)
    path = files.write_results(results, "float-speed", rows, quick, **extra)
    log(f"{'engine':<40} {'samples/s':>10} {'ms/step':>9} {'CPU ms':>8} {'vs torch 2T':>11} "
        f"{'vs torch 1T':>11}")
    for r in rows:
        log(f"{r['engine']:<40} {r['samples_per_s']:>10} {r['ms_per_step']:>9} {r['cpu_ms_per_step']:>8} "
            f"{r['speed_vs_pytorch']:>11} {r['speed_vs_pytorch_1_thread']:>11}")
    log(f"wrote {path}")


def register(add) -> None:
    add("float-speed", run_float_speed)
