"""Which layers train: named, not hard-coded.

Specs: `all`, `last:N` (the last N layers with weights), `layers:a,b` with
names, shell-style globs (`blocks.*.pw1`) or numeric ranges
(`blocks.4-7.pw1` = blocks 4, 5, 6 and 7). The planner adds `auto:<bytes>`.
"""

from __future__ import annotations

import fnmatch
import re

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


def resolve_trainable(graph: Graph, spec: str) -> list[str]:
    """Names of the trainable layers for `spec`, in graph order.

    >>> from mcutrain import zoo
    >>> resolve_trainable(zoo.build("small-cnn"), "last:2")
    ['fc1', 'fc2']
    """
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
            hits = {name for p in _expand_ranges(pattern) for name in fnmatch.filter(layers, p)}
            if not hits:
                raise ValueError(f"trainable spec: no layer matches '{pattern}'; layers with weights: "
                                 f"{', '.join(layers)}")
            chosen |= hits
        if not chosen:
            raise ValueError("trainable spec 'layers:' names no layer")
        return [name for name in layers if name in chosen]
    raise ValueError(f"unknown trainable spec '{spec}'; use all, last:N or layers:a,b "
                     "(globs and ranges like blocks.4-7.pw1 allowed)")
