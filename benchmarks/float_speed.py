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
the process first calls `mcutrain.engines.keep_freed_memory()` (as
`mcutrain pretrain` does), which applies to both sides alike.

Usage:
    python benchmarks/float_speed.py [--arch small-cnn] [--batch 64] [--rounds 7] [--steps 5]

Writes benchmarks/results/float-speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from threadpoolctl import threadpool_limits

from mcutrain import __version__, zoo
from mcutrain.engines import keep_freed_memory
from mcutrain.engines.float_engine import forward
from mcutrain.graph import INPUT, Graph, Op
from mcutrain.io import atomic_write_bytes
from mcutrain.methods.float import FloatMethod

RESULTS = Path(__file__).resolve().parent / "results" / "float-speed.json"


class TorchTwin(torch.nn.Module):
    """The same graph in PyTorch, NCHW, with OIHW weights copied from the OHWI ones."""

    def __init__(self, graph: Graph):
        super().__init__()
        self.graph = graph
        self.weights = torch.nn.ParameterDict()
        for n in graph.parametric():
            w = n.params["weight"]
            w = w.transpose(0, 3, 1, 2) if w.ndim == 4 else w
            key = n.name.replace(".", "_")
            self.weights[key + "_w"] = torch.nn.Parameter(torch.tensor(np.ascontiguousarray(w)))
            self.weights[key + "_b"] = torch.nn.Parameter(torch.tensor(n.params["bias"]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = {INPUT: x}
        for n in self.graph.nodes:
            a, src = n.attrs, [t[s] for s in n.inputs]
            key = n.name.replace(".", "_")
            if n.op == Op.CONV2D:
                pt, pb, pl, pr = a["padding"]
                if pt == pb and pl == pr:   # torch's own (symmetric) padding: no extra copy
                    xin, pad = src[0], (pt, pl)
                else:
                    xin, pad = F.pad(src[0], (pl, pr, pt, pb)), (0, 0)
                y = F.conv2d(xin, self.weights[key + "_w"], self.weights[key + "_b"], stride=a["stride"],
                             padding=pad, groups=a["groups"])
            elif n.op == Op.LINEAR:
                y = F.linear(src[0], self.weights[key + "_w"], self.weights[key + "_b"])
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
        return t[self.graph.output]


def make_sides(arch: str, batch: int, lr: float):
    """Callables that each run one training step of the same model on the same batch."""
    graph = zoo.build(arch, 10, seed=0)
    rng = np.random.default_rng(0)
    x = rng.random((batch, *graph.input_shape), dtype=np.float32)
    y = rng.integers(0, 10, batch)
    method = FloatMethod(graph.copy(), "adam")
    twin = TorchTwin(graph)
    opt = torch.optim.Adam(twin.parameters(), lr=lr)
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
        torch.set_num_threads(torch_threads)
    with threadpool_limits(blas_threads, "blas"):
        step()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", default="small-cnn")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("-o", "--output", type=Path, default=RESULTS)
    p.add_argument("--default-malloc", action="store_true",
                   help="leave glibc's malloc settings alone (see mcutrain.engines.keep_freed_memory)")
    args = p.parse_args()
    malloc_tuned = False if args.default_malloc else keep_freed_memory()
    graph, ours, theirs = make_sides(args.arch, args.batch, args.lr)
    sides = {"mcutrain float engine, BLAS 1 thread": lambda: timed(ours, args.steps, blas_threads=1),
             "mcutrain float engine, BLAS 2 threads": lambda: timed(ours, args.steps, blas_threads=2),
             "pytorch 2 threads": lambda: timed(theirs, args.steps, torch_threads=2),
             "pytorch 1 thread": lambda: timed(theirs, args.steps, torch_threads=1)}
    secs: dict[str, list[float]] = {k: [] for k in sides}
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    for r in range(args.rounds):
        for name, run in sides.items():
            wall, used = run()
            secs[name].append(wall)
            cpu[name].append(used)
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(
            f"{k}: {args.batch / v[-1]:.0f}/s" for k, v in secs.items()), flush=True)
    ref = "pytorch 2 threads"
    rows = []
    for name, s in secs.items():
        ratios = [b / a for a, b in zip(s, secs[ref])]   # >1: faster than torch
        ratios_1t = [b / a for a, b in zip(s, secs["pytorch 1 thread"])]
        rows.append({"engine": name, "arch": args.arch, "batch": args.batch,
                     "samples_per_s": round(args.batch / statistics.median(s), 1),
                     "ms_per_step": round(1e3 * statistics.median(s), 2),
                     "cpu_ms_per_step": round(1e3 * statistics.median(cpu[name]), 2),
                     "speed_vs_pytorch": round(statistics.median(ratios), 3),
                     "speed_vs_pytorch_1_thread": round(statistics.median(ratios_1t), 3),
                     "rounds": args.rounds, "steps_per_round": args.steps})
    doc = {"benchmark": "float-speed", "rows": rows,
           "step": "forward + softmax cross-entropy + backward + Adam update",
           "macs_per_sample": graph.total_macs(), "mcutrain": __version__, "torch": torch.__version__,
           "numpy": np.__version__, "malloc_keeps_freed_memory": malloc_tuned,
           "machine": platform.machine(), "cpus": os.cpu_count(),
           "load_average_1min": round(os.getloadavg()[0], 2)}
    atomic_write_bytes(args.output, lambda f: f.write((json.dumps(doc, indent=2) + "\n").encode()))
    print(f"{'engine':<40} {'samples/s':>10} {'ms/step':>9} {'CPU ms':>8} {'vs torch 2T':>11} "
          f"{'vs torch 1T':>11}")
    for r in rows:
        print(f"{r['engine']:<40} {r['samples_per_s']:>10} {r['ms_per_step']:>9} {r['cpu_ms_per_step']:>8} "
              f"{r['speed_vs_pytorch']:>11} {r['speed_vs_pytorch_1_thread']:>11}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
