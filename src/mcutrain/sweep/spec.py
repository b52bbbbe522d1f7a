"""A sweep file (TOML): its tables checked, its cells expanded, each cell keyed by its configuration.

A sweep is `[base]` (settings every cell shares), `[grid]` (axes whose product gives cells) and/or
`[[cells]]` (an explicit list), plus `[sweep]` (`name`, and `target` for plan figures). A cell is
what `mcutrain.api.train` takes: `method`, `model` (a file) or `arch`, `dataset`, `train_samples`,
`test_samples` and every training option of the method by its API name (`lr`, `seed`, `epochs`,
`queries`, `precision`, ...). A grid value is a value of its axis' key, or a table of several keys
(`method = [{method = "fqt"}, {method = "zo", queries = 10}]`: a method with its options).

Why checked before any cell runs: an unknown key or a rate given as a string in cell 37 of 40 would
otherwise fail an hour in. Every message names the file, the table or cell, the key and what to do.

The key of a cell is a hash of its full canonical configuration -- the options as the factory parses
them, every default of the method filled in, model and dataset files by their sha256 -- plus the
target and the mcutrain version: a finished cell is found again whatever order or spelling the file
uses, and a changed file, option or version is a new cell.

Example:
    >>> spec = parse_sweep('[base]\\narch = "digits-cnn"\\ndataset = "digits"\\n'
    ...                    '[grid]\\nmethod = ["fqt", "zo"]\\nseed = [0, 1]\\n', "s.toml")
    >>> len(spec.cells), spec.axes
    (4, ('method', 'seed'))
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcutrain.data.npz_file import is_npz_path
from mcutrain.errors import UserError
from mcutrain.methods import factory
from mcutrain.methods.state_file import file_sha256
from mcutrain.version import __version__

INPUT_KEYS = ("method", "model", "arch", "dataset", "train_samples", "test_samples")
"""The keys of a cell besides the method's training options."""
OPTION_KEYS = tuple(o.dest for o in factory.options_of("train"))
"""The training options a cell may set (the API names of `mcutrain train`'s options)."""
CELL_KEYS = INPUT_KEYS + OPTION_KEYS
SWEEP_KEYS = ("name", "target")
"""The keys of the `[sweep]` table."""
TABLES = ("sweep", "base", "grid", "cells")
DEFAULT_METHOD = "fqt"


@dataclass(frozen=True)
class Cell:
    """One training run of a sweep: its `key`, its full `config`, and its `axes` values (for tables)."""

    key: str
    config: dict[str, Any]
    axes: dict[str, Any]


@dataclass(frozen=True)
class SweepSpec:
    """A checked sweep: its name, optional plan target, the grid's axis names and every cell in order."""

    name: str
    target: str | None
    axes: tuple[str, ...]
    cells: tuple[Cell, ...]


def toml_parser():
    """The TOML parser: the standard library's `tomllib`.

    NOTE: `tomllib` is in the standard library from Python 3.11 (the package keeps 3.10, where
    nothing else needs TOML); on 3.10 the same parser is the `tomli` package, else a clear message.
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise UserError("reading a sweep file needs Python 3.11 or later (tomllib), or "
                            "'pip install tomli' on Python 3.10") from None
    return tomllib


def read_sweep(path: str | Path) -> SweepSpec:
    """The checked sweep of file `path` (see the module docstring)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot read sweep file '{path}' ({e.strerror or e}); check the path") from None
    except UnicodeDecodeError:
        raise UserError(f"sweep file '{path}' is not UTF-8 text; save it as a TOML text file") from None
    return parse_sweep(text, str(path))


def parse_sweep(text: str, source: str = "<sweep>") -> SweepSpec:
    """The checked sweep of TOML `text` (`source` names it in messages)."""
    tomllib = toml_parser()
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"sweep file '{source}' is not valid TOML: {e}") from None
    return sweep_of(doc, source)


def sweep_of(doc: dict[str, Any], source: str) -> SweepSpec:
    """The checked sweep of a parsed TOML document."""
    where = f"sweep file '{source}'"
    unknown(doc, TABLES, where, "table")
    head = table(doc, "sweep", where)
    unknown(head, SWEEP_KEYS, f"{where} [sweep]", "key")
    name = typed(head.get("name", Path(source).stem), str, f"{where} [sweep] name", "a string")
    target = head.get("target")
    if target is not None:
        target = typed(target, str, f"{where} [sweep] target", "a board name such as \"nrf52840\"")
        check_target(target, f"{where} [sweep] target")
    base = table(doc, "base", where)
    check_keys(base, f"{where} [base]")
    grid = table(doc, "grid", where)
    axes, rows = grid_rows(grid, f"{where} [grid]")
    listed = doc.get("cells", [])
    if not isinstance(listed, list) or not all(isinstance(c, dict) for c in listed):
        raise UserError(f"{where}: 'cells' must be an array of tables ([[cells]] blocks)")
    for i, c in enumerate(listed):
        check_keys(c, f"{where} [[cells]] number {i + 1}")
    rows += [(dict(c), dict(c)) for c in listed]
    if not rows:
        raise UserError(f"{where} has no cells: add a [grid] with at least one axis or [[cells]] tables")
    cells = [make_cell({**base, **settings}, ax, target, f"{where} cell {i + 1} ({label(ax)})")
             for i, (settings, ax) in enumerate(rows)]
    seen: dict[str, int] = {}
    for i, c in enumerate(cells):
        if c.key in seen:
            raise UserError(f"{where}: cells {seen[c.key] + 1} and {i + 1} are the same configuration; "
                            "remove one (a repeat needs another seed)")
        seen[c.key] = i
    return SweepSpec(name, target, axes, tuple(cells))


def grid_rows(grid: dict[str, Any], where: str) -> tuple[tuple[str, ...], list[tuple[dict, dict]]]:
    """The grid's axis names and its product as (settings, axis values) pairs, last axis fastest."""
    values = []
    for axis, vs in grid.items():
        if not isinstance(vs, list) or not vs:
            raise UserError(f"{where} {axis}: give a non-empty list of values, e.g. {axis} = [a, b]")
        for v in vs:
            if isinstance(v, dict):
                check_keys(v, f"{where} {axis} value {v}")
            elif axis not in CELL_KEYS:
                raise UserError(f"{where} axis '{axis}' is not a sweep key and its values are not tables; "
                                f"use one of: {', '.join(CELL_KEYS)}, or tables of them")
        values.append(vs)
    rows = []
    for combo in itertools.product(*values) if values else ():
        settings: dict[str, Any] = {}
        for axis, v in zip(grid, combo):
            settings.update(v if isinstance(v, dict) else {axis: v})
        rows.append((settings, {axis: value_label(v, axis) for axis, v in zip(grid, combo)}))
    return tuple(grid), rows


def make_cell(settings: dict[str, Any], axes: dict[str, Any], target: str | None, where: str) -> Cell:
    """One cell: its settings checked as `mcutrain.api.train` checks them, canonical, keyed."""
    config = canonical(settings, where)
    blob = json.dumps({"config": config, "target": target, "mcutrain": __version__}, sort_keys=True)
    return Cell(hashlib.sha256(blob.encode()).hexdigest()[:20], config, axes)


def keyed_cell(config: dict[str, Any], axes: dict[str, Any], kind: str,
               hidden: tuple[str, ...] = ()) -> Cell:
    """A cell of a benchmark's own runner (`kind`): keyed by its `config` and the version, leaving out
    the `hidden` keys that say where it runs rather than what it computes (a cache folder)."""
    shown = {k: v for k, v in config.items() if k not in hidden}
    blob = json.dumps({"config": shown, "kind": kind, "mcutrain": __version__}, sort_keys=True)
    return Cell(hashlib.sha256(blob.encode()).hexdigest()[:20], config, axes)


def canonical(settings: dict[str, Any], where: str) -> dict[str, Any]:
    """The full configuration: inputs checked, options parsed with the method's defaults filled in."""
    method = settings.get("method", DEFAULT_METHOD)
    if method not in factory.TRAIN_METHODS:
        raise UserError(f"{where}: unknown method '{method}'; use one of {', '.join(factory.TRAIN_METHODS)}")
    if not isinstance(settings.get("dataset"), str):
        raise UserError(f"{where}: give dataset = \"SPEC\" (a registered name such as \"digits\", or a "
                        "file such as \"data.npz\") in [base], the grid or the cell")
    has_model, has_arch = settings.get("model") is not None, settings.get("arch") is not None
    if has_model == has_arch:
        raise UserError(f"{where}: give either model = \"FILE\" or arch = \"NAME\" (trained from random "
                        "weights), not both or neither")
    for k in ("model", "arch"):
        if k in settings:
            typed(settings[k], str, f"{where} {k}", "a string")
    for k in ("train_samples", "test_samples"):
        if settings.get(k) is not None and (not isinstance(settings[k], int) or isinstance(settings[k], bool)
                                            or settings[k] < 1):
            raise UserError(f"{where} {k}: must be a whole number of at least 1, got {settings[k]!r}")
    given = {k: v for k, v in settings.items() if k in OPTION_KEYS}
    try:
        refuse = [d for d in given if method not in factory.BY_DEST[d].methods]
        factory.refuse_foreign(refuse, method, "train")
        resolved = vars(factory.resolve_values("train", method, given))
    except factory.FactoryError as e:
        raise UserError(f"{where}: {e}") from None
    options = {d: resolved[d] for d in OPTION_KEYS if method in factory.BY_DEST[d].methods}
    config = {k: settings.get(k) for k in INPUT_KEYS if k != "method"} | {"method": method, **options}
    for k in ("model", "dataset"):
        path = config[k]
        if path is not None and (k == "model" or is_npz_path(path)):
            config[f"{k}_sha256"] = file_digest(path, f"{where} {k}")
    return config


def file_digest(path: str, where: str) -> str:
    try:
        return file_sha256(path)
    except OSError as e:
        raise UserError(f"{where}: cannot read '{path}' ({e.strerror or e}); check the path") from None


def check_target(name: str, where: str) -> None:
    from mcutrain.targets import TargetError, get_target
    try:
        get_target(name)
    except TargetError as e:
        raise UserError(f"{where}: {e}") from None


def check_keys(settings: dict[str, Any], where: str) -> None:
    unknown(settings, CELL_KEYS, where, "key")


def unknown(d: dict[str, Any], allowed: tuple[str, ...], where: str, what: str) -> None:
    extra = [k for k in d if k not in allowed]
    if extra:
        raise UserError(f"{where}: unknown {what} '{extra[0]}'; use one of: {', '.join(allowed)}")


def table(doc: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    t = doc.get(name, {})
    if not isinstance(t, dict):
        raise UserError(f"{where}: '{name}' must be a table ([{name}] followed by key = value lines)")
    return t


def typed(value: Any, kind: type, where: str, want: str) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise UserError(f"{where}: must be {want}, got {value!r}")
    return value


def value_label(v: Any, axis: str = "") -> Any:
    """How a grid value is shown in tables: itself; a table by its axis' key then the others
    (`zo queries=10`)."""
    if not isinstance(v, dict):
        return v
    head = [str(v[axis])] if axis in v else []
    return " ".join(head + [f"{k}={x}" for k, x in v.items() if k != axis])


def label(axes: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in axes.items()) or "listed"
