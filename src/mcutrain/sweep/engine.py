"""Run a sweep: the cells not finished yet, on local worker processes or a Ray cluster, resumably.

Each outcome is appended to the folder as soon as it arrives (`store`), so a sweep stopped at any
moment loses only the cells still running, and the same command run again skips every finished
cell (by key: `spec`). Failed cells are run again on a rerun; finished ones never are.

Where cells run does not change what they compute: each cell is seeded from its own configuration
and runs on one BLAS thread (`cell`), so one worker, eight workers or a Ray cluster write the same
result lines (in the order cells finish; the report orders them by the sweep file).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from mcutrain.progress import Progress
from mcutrain.sweep import store
from mcutrain.sweep.cell import CellOutcome, CellRunner, CellTask, run_cell, train_cell
from mcutrain.sweep.spec import SweepSpec


def available_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS
        return max(1, os.cpu_count() or 1)


def run_local(tasks: list[CellTask], workers: int, runner: CellRunner) -> Iterator[CellOutcome]:
    """Outcomes of `tasks` in completion order, on `workers` processes (in this one when 1).

    NOTE: the pool spawns fresh interpreters rather than forking this one: a fork copies BLAS and
    progress-bar threads mid-state, a spawned worker starts clean.
    """
    work = partial(run_cell, runner=runner)
    if workers <= 1 or len(tasks) <= 1:
        yield from map(work, tasks)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(workers, len(tasks)), mp_context=spawn) as pool:
        futures = [pool.submit(work, t) for t in tasks]
        for f in as_completed(futures):
            yield f.result()


def run_sweep(spec: SweepSpec, out_dir: str | Path, workers: int | None = None, ray: str | None = None,
              runner: CellRunner = train_cell, progress: bool | None = None,
              log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every unfinished cell of `spec` into `out_dir`; the summary (`mcutrain sweep --json`).

    `workers`: local processes (default: the cores available); `ray`: a Ray cluster's address or
    'auto' instead. Summary: `cells` in the sweep, `done` and `failed` in this run, `skipped`
    (finished before), `results` (the results file), `seconds`.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    store.write_manifest(out, {"name": spec.name, "axes": list(spec.axes), "target": spec.target,
                               "cells": [c.key for c in spec.cells]})
    finished = store.latest(out)
    tasks = [CellTask(c.key, c.config, c.axes, spec.target) for c in spec.cells
             if finished.get(c.key, {}).get("status") != "done"]
    summary = {"sweep": spec.name, "cells": len(spec.cells), "done": 0,
               "skipped": len(spec.cells) - len(tasks), "failed": 0, "results": str(out / store.RESULTS)}
    t0 = time.perf_counter()
    if ray is not None:
        from mcutrain.sweep.ray_tasks import run_ray
        outcomes: Iterable[CellOutcome] = run_ray(tasks, ray, runner)
    else:
        outcomes = run_local(tasks, workers or available_cores(), runner)
    with Progress(total=len(tasks), desc=f"sweep {spec.name}", unit="cell", show=progress) as bar:
        for o in outcomes:
            store.append_line(out / store.RESULTS, o.line)
            store.append_line(out / store.TIMINGS, o.timing)
            summary["failed" if o.failed else "done"] += 1
            n = summary["done"] + summary["failed"]
            eta = (time.perf_counter() - t0) / n * (len(tasks) - n)
            bar.update(1, done=summary["done"], failed=summary["failed"], eta=f"{eta:.0f} s")
            if o.failed and log is not None:
                err = o.line["error"]
                log(f"cell {o.line['key']} ({axes_text(o.line['axes'])}) failed: "
                    f"{err['type']}: {err['message']}")
    summary["seconds"] = time.perf_counter() - t0
    return summary


def axes_text(axes: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in axes.items())


def stderr_log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
