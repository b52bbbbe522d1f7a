"""The benchmark runner: a registry of named benchmarks and the files they write.

Each benchmark module of the package `mcutrain/bench/` (one per topic) defines
`register(add)` and calls `add(name, func)` for each benchmark (helper modules
of a topic, such as its tables, define no `register`); `func(work, results,
quick, log, docs)` runs it, with `work` a cache directory (pretrained models, ...),
`results` the directory of result JSON files, `docs` the directory holding
`benchmarks.md` and figures, `log` a print-like callable. Benchmarks write
through the helpers here:

- `write_results(results, name, rows, **extra)`: `results/<name>.json` =
  `{"benchmark": name, "rows": [...], ...}`, atomically (a failed run leaves the
  previous file intact); called after every finished row, so a long run that is
  stopped still leaves what it measured (`"complete": false`).
- `update_docs(docs, name, markdown)`: the table between `<!-- bench:NAME -->`
  and `<!-- /bench:NAME -->` in `docs/benchmarks.md`, so many benchmarks share one page.

`--quick` runs are for tests: they write `<name>.quick.json` and never touch the docs.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcutrain.io import atomic_write_bytes

BenchFunc = Callable[..., Any]
_REGISTRY: dict[str, BenchFunc] = {}
DOCS_PAGE = "benchmarks.md"
PAGE_HEAD = ("# Benchmarks\n\nEvery table below is written by `mcutrain bench NAME` from "
             "`benchmarks/results/NAME.json`; the text around the tables is kept.\n")


def add(name: str, func: BenchFunc) -> None:
    """Register benchmark `name` (the `add` handed to each module's `register`)."""
    _REGISTRY[name] = func


def benchmarks() -> dict[str, BenchFunc]:
    """Every registered benchmark, after importing each module of `mcutrain.bench` once.

    Discovery is by package membership, not by name: a new topic is a new module with a
    `register` hook, and nothing else has to list it. So that `mcutrain bench --list` works on
    a core install, the modules import optional dependencies (torch) inside their functions.
    """
    import mcutrain.bench as package
    for mod in pkgutil.iter_modules(package.__path__):
        if mod.name == "runner":
            continue
        module = importlib.import_module(f"{package.__name__}.{mod.name}")
        hook = getattr(module, "register", None)
        if hook is not None:
            hook(add)
    return dict(sorted(_REGISTRY.items()))


def result_path(results: Path, name: str, quick: bool = False) -> Path:
    """The result file of benchmark `name`: `NAME.json`, or `NAME.quick.json` for a `--quick` run."""
    return Path(results) / (f"{name}.quick.json" if quick else f"{name}.json")


def write_results(results: Path, name: str, rows: list[dict[str, Any]], quick: bool = False,
                  **extra: Any) -> Path:
    """Write `{"benchmark", "rows", **extra}` to the result file atomically; returns its path."""
    path = result_path(results, name, quick)
    doc = {"benchmark": name, "rows": rows, **extra}
    text = (json.dumps(doc, indent=2, default=_plain) + "\n").encode()
    atomic_write_bytes(path, lambda f: f.write(text))
    return path


def _plain(o: Any) -> Any:
    import numpy as np
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def update_docs(docs: Path, name: str, markdown: str) -> Path:
    """Replace (or append) the block of benchmark `name` in `docs/benchmarks.md`."""
    page = Path(docs) / DOCS_PAGE
    text = page.read_text() if page.exists() else PAGE_HEAD
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{markdown.strip()}\n{end}"
    if start in text and end in text:
        text = text[:text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + f"\n\n## {name}\n\n{block}\n"
    atomic_write_bytes(page, lambda f: f.write(text.encode()))
    return page


def markdown_table(rows: list[dict[str, Any]], columns: list[str], fmt: dict[str, str] | None = None) -> str:
    """A GitHub table of `rows` over `columns`; `fmt` maps a column to a format spec (e.g. '.3f')."""
    fmt = fmt or {}

    def cell(row: dict[str, Any], c: str) -> str:
        v = row.get(c, "")
        if v is None:
            return "—"
        if c in fmt and isinstance(v, (int, float)):
            return format(v, fmt[c])
        return str(v)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r, c) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def limit_threads(n: int = 1):
    """Pin BLAS to `n` threads (returns a context manager; a no-op without threadpoolctl).

    NOTE: on a shared two-core machine, multi-threaded BLAS spins against other
    processes and runs small GEMMs several times slower than one thread.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        from contextlib import nullcontext
        return nullcontext()
    return threadpool_limits(limits=n)


def run(name: str, quick: bool = False, work: Path = Path("benchmarks/work"),
        results: Path = Path("benchmarks/results"), docs: Path = Path("docs"),
        log: Callable[[str], None] = print) -> None:
    """Run benchmark `name`; raises KeyError naming the available ones."""
    table = benchmarks()
    if name not in table:
        raise KeyError(f"unknown benchmark '{name}'; available: {', '.join(table)}")
    Path(work).mkdir(parents=True, exist_ok=True)
    Path(results).mkdir(parents=True, exist_ok=True)
    with limit_threads(1):
        table[name](Path(work), Path(results), quick, log, Path(docs))
