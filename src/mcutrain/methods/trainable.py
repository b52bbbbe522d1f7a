"""Which layers train: named, not hard-coded.

Specs: `all`, `last:N` (the last N layers with weights), `layers:a,b` with
names, shell-style globs (`blocks.*.pw1`) or numeric ranges
(`blocks.4-7.pw1` = blocks 4, 5, 6 and 7). The planner adds `auto:<bytes>`.

An imported model's layers may have been renamed into the IR's naming rule; its file's
provenance keeps `source_names` ({IR name: original name}), and with it `layers:` patterns
match either name. Results, reports and generated code always use the IR names.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from mcutrain.graph import Graph

_RANGE = re.compile(r"(\d+)-(\d+)")


def _expand_ranges(pattern: str) -> list[str]:
    m = _RANGE.search(pattern)
    if not m:
        return [pattern]
    lo, hi = int(m.group(1)), int(m.group(2))
    if lo > hi:
        raise ValueError(f"range {m.group(0)} in '{pattern}' runs backwards")
    head, tail = pattern[: m.start()], pattern[m.end():]
    return [p for i in range(lo, hi + 1) for p in _expand_ranges(f"{head}{i}{tail}")]


def source_names_of(provenance: Any) -> dict[str, str]:
    """`{IR name: original name}` from a model file's provenance (`mcutrain import` writes it);
    empty when absent or not a mapping of strings, so a malformed entry only disables the aliases."""
    names = provenance.get("source_names") if isinstance(provenance, dict) else None
    if not isinstance(names, dict):
        return {}
    return {k: v for k, v in names.items() if isinstance(k, str) and isinstance(v, str)}


def user_names(layers: list[str], source_names: dict[str, str]) -> dict[str, str]:
    """`{IR name: original name}` of those `layers` an import renamed: what reports add so that
    they speak the names the user's framework gave (the IR names stay the identifiers)."""
    return {n: source_names[n] for n in layers if source_names.get(n, n) != n}


def _matches(pattern: str, layers: list[str], source_names: dict[str, str]) -> set[str]:
    """Layers whose IR name or original name matches `pattern` (a name, glob or range)."""
    if pattern in layers:     # an exact name first: 'conv1-2' is a name, not the range 1-2
        return {pattern}
    hits: set[str] = set()
    for p in _expand_ranges(pattern):
        hits |= set(fnmatch.filter(layers, p))
        hits |= {n for n in layers if n in source_names and fnmatch.fnmatchcase(source_names[n], p)}
    return hits


def resolve_trainable(graph: Graph, spec: str, source_names: dict[str, str] | None = None) -> list[str]:
    """Names of the trainable layers for `spec`, in graph order.

    `source_names` ({IR name: original name}, `source_names_of`) lets `layers:` name an
    imported model's layers by their original names too; the result holds IR names.

    >>> from mcutrain import zoo
    >>> resolve_trainable(zoo.build("small-cnn"), "last:2")
    ['fc1', 'fc2']
    """
    aliases = source_names or {}
    layers = [n.name for n in graph.parametric()]
    spec = spec.strip()
    if spec == "all":
        return layers
    if spec.startswith("last:"):
        try:
            n = int(spec[5:])
        except ValueError:
            raise ValueError(f"trainable spec '{spec}': last:N needs a whole number") from None
        if not 1 <= n <= len(layers):
            raise ValueError(f"trainable spec '{spec}': the model has {len(layers)} layers with weights")
        return layers[-n:]
    if spec.startswith("layers:"):
        chosen: set[str] = set()
        for pattern in filter(None, (p.strip() for p in spec[7:].split(","))):
            hits = _matches(pattern, layers, aliases)
            if not hits:
                raise ValueError(f"trainable spec: no layer matches '{pattern}'; layers with weights: "
                                 f"{', '.join(layers)}")
            chosen |= hits
        if not chosen:
            raise ValueError("trainable spec 'layers:' names no layer")
        return [name for name in layers if name in chosen]
    raise ValueError(f"unknown trainable spec '{spec}'; use all, last:N or layers:a,b "
                     "(globs and ranges like blocks.4-7.pw1 allowed)")


def internal_spec(graph: Graph, spec: str, source_names: dict[str, str] | None) -> str:
    """`spec` with a `layers:` list of original names rewritten as the IR names it selects.

    Why: the methods and the planner resolve `cfg.trainable` on the graph alone; a command
    that loaded a model file translates the user's spec once, here, and passes the result on.
    Other specs (and any spec without `source_names`) are returned unchanged.
    """
    if not source_names or not spec.strip().startswith("layers:"):
        return spec
    return "layers:" + ",".join(resolve_trainable(graph, spec, source_names))
