"""A benchmark's runs as one sweep: cells through the sweep engine, their results back in order.

What the benchmarks that run as sweeps (`zo`'s zo-adapt, `fqt_scratch`, `fqt_transfer`) share: the
sweep's folder under WORK/sweeps/ (a stopped run resumes from it; `fresh_start` empties it after a
complete run, so a rerun measures the code as it is now), local workers or a Ray cluster, and each
cell's result joined with its measured seconds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from mcutrain.bench.subset import SUFFIX
from mcutrain.sweep import store
from mcutrain.sweep.cell import CellRunner
from mcutrain.sweep.engine import run_sweep
from mcutrain.sweep.spec import Cell, SweepSpec


def sweep_dir(work: Path, name: str, quick: bool, subset: bool = False) -> Path:
    """WORK/sweeps/NAME[-quick][-subset]: a quick run or a subset (`--only`) never resumes a full one."""
    return Path(work) / "sweeps" / (name + ("-quick" if quick else "") + (f"-{SUFFIX}" if subset else ""))


def fresh_start(result_file: Path, *folders: Path) -> None:
    """Empty the sweep `folders` when the benchmark's last result file says it completed (or has no
    `complete` key: written before benchmarks resumed)."""
    if result_file.exists() and json.loads(result_file.read_text()).get("complete", True):
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


def run_cells(name: str, cells: list[Cell], axes: tuple[str, ...], out: Path, runner: CellRunner,
              workers: int | None, ray: str | None) -> list[dict[str, Any]]:
    """Run `cells` (resuming `out`); each cell's `run` result with its timing (`seconds` and what the
    runner measured), in cell order.

    A failed cell stops the benchmark with its error: a table with a hole would not mean the same.
    """
    run_sweep(SweepSpec(name, None, axes, tuple(cells)), out, workers=workers, ray=ray, runner=runner)
    lines = store.latest(out)
    timings = {t["key"]: {k: v for k, v in t.items() if k != "key"}
               for t in store.read_lines(out / store.TIMINGS)}
    failed = [lines[c.key] for c in cells if lines[c.key]["status"] != "done"]
    if failed:
        err = failed[0]["error"]
        raise RuntimeError(f"{name}: {len(failed)} runs failed (rerun to retry them), first "
                           f"{failed[0]['axes']}: {err['type']}: {err['message']}")
    return [lines[c.key]["run"] | timings.get(c.key, {"seconds": 0.0}) for c in cells]
