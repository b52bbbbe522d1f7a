"""One cell of a sweep: a training run through the Python API, as a result line and its timing.

A cell runs where a worker is (a local process, a Ray task on another machine), so its task is plain
data (`CellTask`) and its outcome too. The result line holds only what the configuration decides --
the train JSON without its speed, the test accuracy of `mcutrain.api.evaluate`, the plan figures --
so it is the same bit for bit on any worker count or machine; what the machine decides (seconds,
samples/s) is the `timing` beside it. BLAS runs one thread per cell: several cells share the cores,
and one thread gives the same float sums wherever a cell runs.

A cell that fails is a line too: its error (a UserError's message, or the type and message of a
bug), so one bad cell never stops the sweep.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcutrain.errors import UserError
from mcutrain.methods import factory
from mcutrain.options import blas_threads
from mcutrain.version import __version__

TIMED_KEYS = ("samples_per_s",)
"""Keys of the train JSON that measure the machine: kept out of the result line, in its timing."""


@dataclass(frozen=True)
class CellTask:
    """What a worker needs to run one cell: plain data, so it pickles to any process or node."""

    key: str
    config: dict[str, Any]
    axes: dict[str, Any]
    target: str | None = None


@dataclass(frozen=True)
class CellOutcome:
    """A finished cell: its result `line` (deterministic) and its `timing` (measured)."""

    line: dict[str, Any]
    timing: dict[str, Any]

    @property
    def failed(self) -> bool:
        return self.line["status"] == "failed"


CellRunner = Callable[[dict[str, Any], str | None], dict[str, Any]]
"""What computes a cell's results from its configuration and target (`train_cell`, or a benchmark's).

A runner that measures something besides the cell's seconds (a benchmark's backward time) returns
it under `timing`: it goes to the cell's timing line, never into its result line."""


def train_cell(config: dict[str, Any], target: str | None) -> dict[str, Any]:
    """The results of one training cell: train JSON, eval on the test split, plan figures on `target`."""
    from mcutrain.api import evaluate, plan, train

    method = config["method"]
    options = {k: config[k] for k in config if k in factory.BY_DEST}
    r = train(config["model"], config["dataset"], method, arch=config["arch"],
              train_samples=config["train_samples"], test_samples=config["test_samples"], **options)
    out: dict[str, Any] = {"train": r.result,
                           "eval": {"accuracy": evaluate(r.model, config["dataset"], seed=config["seed"],
                                                         test_samples=config["test_samples"])}}
    if target is not None:
        planned = {o.dest for o in factory.options_of("plan") if method in o.methods}
        out["plan"] = plan(r.model, method, target, **{k: v for k, v in options.items() if k in planned}
                           ).to_json()
    return out


def run_cell(task: CellTask, runner: CellRunner = train_cell) -> CellOutcome:
    """Run one cell on one BLAS thread; never raises for the cell's own failure (it becomes the line)."""
    t0 = time.perf_counter()
    line: dict[str, Any] = {"key": task.key, "status": "done", "axes": task.axes, "config": task.config}
    timing: dict[str, Any] = {"key": task.key}
    try:
        with blas_threads(1):
            results = runner(task.config, task.target)
        timing.update(results.pop("timing", {}))
        for k in TIMED_KEYS:
            if k in results.get("train", {}):
                timing[k] = results["train"].pop(k)
        line.update(results)
    except UserError as e:
        line.update(status="failed", error={"type": "UserError", "message": str(e)})
    except Exception as e:
        line.update(status="failed", error={"type": type(e).__name__, "message": str(e)})
    line["mcutrain"] = __version__
    timing["seconds"] = time.perf_counter() - t0
    return CellOutcome(line, timing)
