"""One side of one `sim-speed` round in a fresh process: ``python -m mcutrain.bench.sim_speed_step SPEC``.

`SPEC` is a JSON object (`Side` fields). The process builds the side -- an mcutrain method or
the PyTorch twin (`torch_twin`) -- on a fixed random batch, runs `warmup` steps, then times
`steps` steps and prints ``{"seconds": ...}``: process CPU time of the steps only (imports,
model set-up and warm-up excluded), or wall time for a side that runs on several cores (ZO
workers, PyTorch threads), whose CPU time would count every core. A fresh process per side and
round means neither side warms the other's allocator, caches or thread pools. An mcutrain side
first calls `allocator.keep_freed_memory()`, as `mcutrain train` does (`methods.loop.fit`), so
it measures the allocator users run; the PyTorch side keeps glibc's defaults, as its users do.
The printed object says which (``"keep_freed_memory"``).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from mcutrain.allocator import keep_freed_memory

MCUNET_INPUT = (128, 128, 3)


@dataclass(frozen=True)
class Side:
    """What one process measures."""

    side: str                  # "mcutrain" or "torch"
    arch: str                  # zoo architecture: small-cnn or mcunet-5fps (at 128x128)
    batch: int
    steps: int
    method: str = "fqt"        # fqt, zo, bp-qas, float (mcutrain's float32 engine)
    precision: str = "int8"    # fqt's; zo: the perturbation mode (wp, np, mix)
    trainable: str = "all"
    queries: int = 10
    workers: int = 1           # zo processes / torch threads
    warmup: int = 1

    @property
    def clock(self) -> str:
        return "wall" if self.workers > 1 else "process CPU"


def graph_of(arch: str):
    from mcutrain import zoo
    return zoo.build(arch, 10, MCUNET_INPUT if arch == "mcunet-5fps" else None, seed=0)


def build_step(s: Side):
    """A no-argument callable running one training step of side `s`."""
    g = graph_of(s.arch)
    if s.side == "torch":
        from mcutrain.bench.torch_twin import torch_step
        return torch_step(g, s.batch, s.workers)
    rng = np.random.default_rng(0)
    x = rng.random((s.batch, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, 10, s.batch)
    calib = rng.random((max(s.batch, 16), *g.input_shape), dtype=np.float32)
    m = _method(s, g, calib)
    return lambda: m.step(x, y, 0.001)


def _method(s: Side, g, calib: np.ndarray) -> Any:
    from mcutrain.engines import ptq
    if s.method == "fqt":
        from mcutrain.methods.fqt import FQT
        from mcutrain.methods.fqt_state import FQTConfig
        return FQT(g, FQTConfig(precision=s.precision, trainable=s.trainable), calib)
    if s.method == "float":
        from mcutrain.methods.float import FloatMethod
        from mcutrain.methods.trainable import resolve_trainable
        return FloatMethod(g, "sgd", resolve_trainable(g, s.trainable))
    qm = ptq.quantize_model(g, calib)
    if s.method == "zo":
        from mcutrain.methods.zo import ZOConfig, ZOMethod
        return ZOMethod(qm, ZOConfig(trainable=s.trainable, queries=s.queries, perturb=s.precision),
                        workers=s.workers)
    if s.method == "bp-qas":
        from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
        return BPQASMethod(qm, BPQASConfig(trainable=s.trainable))
    raise ValueError(f"sim-speed: unknown method {s.method!r}")


def measure(s: Side) -> float:
    """Seconds of `s.steps` steps after `s.warmup` (in the clock `s.clock` names)."""
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1 if s.side == "mcutrain" else s.workers):
        step = build_step(s)
        for _ in range(s.warmup):
            step()
        clock = time.perf_counter if s.clock == "wall" else time.process_time
        t0 = clock()
        for _ in range(s.steps):
            step()
        return clock() - t0


def main(argv: list[str]) -> int:
    s = Side(**json.loads(argv[0]))
    kept = s.side == "mcutrain" and keep_freed_memory()   # NOTE: before any step allocates
    print(json.dumps({"seconds": measure(s), "keep_freed_memory": kept, **asdict(s)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
