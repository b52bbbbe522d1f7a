"""Model files: one `.npz` holding the arrays plus a JSON description.

The JSON entry (`__meta__`, stored as UTF-8 bytes in a uint8 array so that
no pickle is ever involved) carries the format tag and version, the graph
structure, quantization parameters and provenance. Files are loaded with
`allow_pickle=False` and written atomically (temp file, fsync, rename), so a
crash never leaves a half-written model where a good one was.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.graph import Graph, GraphError

FORMAT = "mcutrain-model"
VERSION = 1
META_KEY = "__meta__"


class ModelFileError(ValueError):
    """A model file that cannot be read; the message says what is wrong and what to do."""


@dataclass
class ModelFile:
    """What a model file holds: the float graph, extra arrays (e.g. int8 tensors) and metadata."""

    graph: Graph
    meta: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


def atomic_write_bytes(path: str | Path, write) -> None:
    """Call `write(fileobj)` on a temp file beside `path`, then rename it over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save(path: str | Path, graph: Graph, meta: dict[str, Any] | None = None,
         arrays: dict[str, np.ndarray] | None = None) -> Path:
    """Write `graph` (+ extra `arrays` and `meta`) to `path` atomically; returns the path.

    Extra array keys must not collide with graph parameter keys ('<node>.<param>').
    """
    path = Path(path)
    if path.suffix != ".npz":
        raise ModelFileError(f"model files end in .npz, got '{path}'")
    params = graph.arrays()
    extra = dict(arrays or {})
    clash = sorted(set(params) & set(extra) | ({META_KEY} & set(extra)))
    if clash:
        raise ModelFileError(f"extra array names collide with parameters: {clash}")
    doc = {"format": FORMAT, "version": VERSION, "graph": graph.to_dict(),
           "extra_arrays": sorted(extra), **(meta or {})}
    blob = np.frombuffer(json.dumps(doc).encode(), np.uint8)
    payload = {**{k: np.ascontiguousarray(v) for k, v in params.items()}, **extra, META_KEY: blob}
    atomic_write_bytes(path, lambda f: np.savez_compressed(f, **payload))
    return path


def load(path: str | Path) -> ModelFile:
    """Read a model file written by `save`; refuse anything else with a clear message."""
    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"model file '{path}' does not exist")
    with open(path, "rb") as f:
        if f.read(4) != b"PK\x03\x04":
            raise ModelFileError(f"'{path}' is not a readable .npz model file (not a zip archive); "
                                 "re-create it with 'mcutrain pretrain'")
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, EOFError, OSError) as e:
        raise ModelFileError(f"'{path}' is not a readable .npz model file ({e}); it may be truncated "
                             "or not a model file: re-create it with 'mcutrain pretrain'") from None
    except ValueError as e:
        raise ModelFileError(f"'{path}' holds data that needs pickle to load ({e}); "
                             "mcutrain never loads pickled data") from None
    if META_KEY not in data:
        raise ModelFileError(f"'{path}' is an .npz file but not an mcutrain model (no '{META_KEY}' entry)")
    try:
        doc = json.loads(data.pop(META_KEY).tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelFileError(f"'{path}': model description is corrupt ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelFileError(f"'{path}' is not an mcutrain model file (format tag missing)")
    if doc.get("version") != VERSION:
        raise ModelFileError(f"'{path}' has model format version {doc.get('version')}; this mcutrain "
                             f"reads version {VERSION}: re-export it with a matching mcutrain")
    try:
        graph = Graph.from_dict(doc["graph"], data)
    except (GraphError, KeyError) as e:
        raise ModelFileError(f"'{path}': invalid graph: {e}") from None
    missing = [k for k in doc.get("extra_arrays", []) if k not in data]
    if missing:
        raise ModelFileError(f"'{path}': arrays listed but missing: {missing}")
    extra = {k: data[k] for k in doc.get("extra_arrays", [])}
    meta = {k: v for k, v in doc.items() if k not in ("format", "version", "graph", "extra_arrays")}
    return ModelFile(graph, meta, extra)
