"""What every benchmark writes through: its result JSON, its docs block, its tables, its threads.

- `write_results(results, name, rows, **extra)`: `results/<name>.json` =
  `{"benchmark": name, "rows": [...], ...}`, atomically (a failed run leaves the
  previous file intact); called after every finished row, so a long run that is
  stopped still leaves what it measured (`"complete": false`).
- `update_docs(docs, name, markdown)`: the table between `<!-- bench:NAME -->`
  and `<!-- /bench:NAME -->` in `docs/benchmarks.md`, so many benchmarks share one page.

Kept apart from the registry (`runner`), which imports every benchmark module: the modules
import this one, so the registry stays above them and no import goes in a circle.
`--quick` runs are for tests: they write `<name>.quick.json` and never touch the docs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcutrain.bench.subset import SUFFIX, Only, restrict
from mcutrain.io import atomic_write_bytes, json_plain

DOCS_PAGE = "benchmarks.md"
PAGE_HEAD = ("# Benchmarks\n\nEvery table below is written by `mcutrain bench NAME` from "
             "`benchmarks/results/NAME.json`; the text around the tables is kept.\n")


def result_path(results: Path, name: str, quick: bool = False, subset: bool = False) -> Path:
    """The result file of benchmark `name`: `NAME.json`, `NAME.quick.json` for a `--quick` run,
    with `.subset` before `.json` for a run of part of a sweep benchmark (`--only`)."""
    return Path(results) / (name + (".quick" if quick else "") + (f".{SUFFIX}" if subset else "") + ".json")


def write_results(results: Path, name: str, rows: list[dict[str, Any]], quick: bool = False,
                  subset: bool = False, **extra: Any) -> Path:
    """Write `{"benchmark", "rows", **extra}` to the result file atomically; returns its path."""
    path = result_path(results, name, quick, subset)
    doc = {"benchmark": name, "rows": rows, **extra}
    text = (json.dumps(doc, indent=2, default=json_plain) + "\n").encode()
    atomic_write_bytes(path, lambda f: f.write(text))
    return path


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


def sweep_grid(name: str, only: Only | None = None) -> dict[str, list]:
    """The `[grid]` axes of benchmark `name`'s sweep file (`bench/sweeps/NAME.toml`, package data),
    restricted to the values of `only` (`subset`: a UserError for an axis or value it lacks)."""
    from importlib import resources

    from mcutrain.sweep.spec import toml_parser
    text = resources.files("mcutrain.bench").joinpath("sweeps", f"{name}.toml").read_text(encoding="utf-8")
    grid = dict(toml_parser().loads(text)["grid"])
    return restrict(name, grid, only) if only else grid
