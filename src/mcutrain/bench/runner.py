"""The benchmark registry and runner: `mcutrain bench NAME` finds and runs one benchmark.

Each benchmark module of the package `mcutrain/bench/` (one per topic) defines
`register(add)` and calls `add(name, func)` for each benchmark (helper modules
of a topic, such as its tables, define no `register`); `func(work, results,
quick, log, docs)` runs it, with `work` a cache directory (pretrained models, ...),
`results` the directory of result JSON files, `docs` the directory holding
`benchmarks.md` and figures, `log` a print-like callable. Benchmarks write their
files through `bench.files`.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcutrain.bench.files import limit_threads

BenchFunc = Callable[..., Any]
_REGISTRY: dict[str, BenchFunc] = {}
HELPERS = frozenset({"runner", "files"})
"""Modules of the package that are not benchmark topics."""


def add(name: str, func: BenchFunc) -> None:
    """Register benchmark `name` (the `add` handed to each module's `register`)."""
    _REGISTRY[name] = func


def benchmarks() -> dict[str, BenchFunc]:
    """Every registered benchmark, after importing each module of `mcutrain.bench` once.

    Discovery is by package membership, not by name: a new topic is a new module with a
    `register` hook, and nothing else has to list it. So that `mcutrain bench --list` works on
    a core install, the modules import optional dependencies (torch) inside their functions.
    """
    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if mod.name in HELPERS:
            continue
        module = importlib.import_module(f"mcutrain.bench.{mod.name}")
        hook = getattr(module, "register", None)
        if hook is not None:
            hook(add)
    return dict(sorted(_REGISTRY.items()))


def runs_as_sweep(func: BenchFunc) -> bool:
    """Whether a benchmark runs through the sweep engine (it takes `ray`: `mcutrain bench NAME --ray`)."""
    return "ray" in inspect.signature(func).parameters


def run(name: str, quick: bool = False, work: Path = Path("benchmarks/work"),
        results: Path = Path("benchmarks/results"), docs: Path = Path("docs"),
        log: Callable[[str], None] = print, ray: str | None = None,
        only: dict[str, list[str]] | None = None) -> None:
    """Run benchmark `name` (its sweeps on the Ray cluster at `ray`; only the grid values of `only`,
    `bench.subset`); KeyError naming the available ones, ValueError for `ray` or `only` on a
    benchmark that is not a sweep."""
    table = benchmarks()
    if name not in table:
        raise KeyError(f"unknown benchmark '{name}'; available: {', '.join(table)}")
    sweeps = [n for n, f in table.items() if runs_as_sweep(f)]
    if (ray is not None or only) and name not in sweeps:
        raise ValueError(f"benchmark '{name}' does not run as a sweep, so --ray cannot spread it "
                         f"nor --only restrict it; the sweeps: {', '.join(sweeps)}")
    Path(work).mkdir(parents=True, exist_ok=True)
    Path(results).mkdir(parents=True, exist_ok=True)
    with limit_threads(1):
        table[name](Path(work), Path(results), quick, log, Path(docs),
                    **({"ray": ray} if ray else {}), **({"only": only} if only else {}))
