"""Model files: one `.npz` holding the arrays plus a JSON description.

The JSON entry (`__meta__`, stored as UTF-8 bytes in a uint8 array so that
no pickle is ever involved) carries the format tag and version, the graph
structure, quantization parameters and provenance. Files are written
atomically (temp file, fsync, rename), so a crash never leaves a half-written
model where a good one was.

Loading treats the file as hostile input. It opens the zip itself (through
`mcutrain.npz_members`, which a dataset file shares) and reads,
in order: the description alone (at most `limits.MAX_META_BYTES`, nesting at
most `limits.MAX_JSON_DEPTH`, field types checked); then only the `.npy`
headers of the arrays the graph references (every other member is ignored,
never decompressed); the graph is built on zero-memory placeholders of the
declared shapes, which checks every shape and the size limits of
`mcutrain.limits`; only then is each referenced array's data read, exactly the
bytes its header declares. So a load reads at most `limits.load_bound_bytes`
of the graph's parameter count, whatever the file claims.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import limits
from mcutrain.graph import Graph, GraphError
from mcutrain.graph_description import check_description
from mcutrain.npz_members import (
    MAX_NPY_HEADER,
    NpyHeader,
    Refused,
    member_data,
    member_header,
    open_member,
    open_zip,
    read_exact,
    read_header,
    zip_members,
)

FORMAT = "mcutrain-model"
VERSION = 1
META_KEY = "__meta__"
STALE_TMP_SECONDS = 3600
"""Temp files of an interrupted save older than this are removed by the next save."""


class ModelFileError(ValueError):
    """A model file that cannot be read; the message says what is wrong and what to do."""


class OutputPathError(ValueError):
    """An output path a command could not write; found before the work starts."""


@dataclass
class ModelFile:
    """What a model file holds: the float graph, extra arrays (e.g. int8 tensors) and metadata."""

    graph: Graph
    meta: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


# ---------------------------------------------------------------- writing


def _umask() -> int:
    """The process umask, read without changing it where /proc says it (else set and restore)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # NOTE: not thread-safe, hence only the fallback
    os.umask(mask)
    return mask


def _remove_stale_tmp(path: Path) -> None:
    """Remove `.NAME.*.tmp` leftovers of `path` (a save killed before its cleanup) older than an hour."""
    cutoff = time.time() - STALE_TMP_SECONDS
    try:
        for p in path.parent.glob(f".{glob_escape(path.name)}.*.tmp"):
            try:
                if p.is_file() and not p.is_symlink() and p.stat().st_mtime < cutoff:
                    p.unlink()
            except OSError:
                continue
    except OSError:
        pass


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def json_plain(o: Any) -> Any:
    """`json.dump(default=...)` for numpy scalars and arrays: every `--json` result and benchmark
    file holds plain numbers, whatever dtype the simulator computed them in."""
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def atomic_write_bytes(path: str | Path, write) -> None:
    """Call `write(fileobj)` on a temp file beside `path`, then rename it over `path`.

    The file gets the mode a plain `open` would give (0o666 minus the umask), not
    mkstemp's 0o600; the temp file is removed on any failure, and stale temp files of
    earlier interrupted saves of the same target are removed first.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_tmp(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_writable(path: str | Path, suffix: str | None = None, what: str = "output",
                   directory: bool = False) -> Path:
    """Refuse, before any work, an output the command could not write at the end.

    `path` must not be an existing folder (with `directory`: must not be an existing
    file), must end in `suffix` when given, and its nearest existing parent must be a
    folder this process may write in (missing parents are created when saving). Raises
    OutputPathError saying what to do; returns the path.
    """
    p = Path(path)
    if not str(path).strip():
        raise OutputPathError(f"{what}: the path is empty")
    if suffix is not None and p.suffix.lower() != suffix:
        raise OutputPathError(f"{what} '{p}' must end in {suffix}")
    if directory:
        if p.exists() and not p.is_dir():
            raise OutputPathError(f"{what} '{p}' exists and is not a folder; pick another name")
    elif p.is_dir():
        raise OutputPathError(f"{what} '{p}' is a folder; give a file name inside it")
    parent = p if directory else p.parent
    while not parent.exists() and parent.parent != parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputPathError(f"{what} '{p}': '{parent}' is not a folder, so '{p}' cannot be created")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"{what} '{p}': no permission to write in '{parent}'; pick a writable folder")
    return p


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


# ---------------------------------------------------------------- reading


def _json_depth(text: str) -> int:
    """Deepest nesting of [ and { outside strings, computed without recursion."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    b = np.frombuffer(bare.encode("utf-8", "surrogatepass"), np.uint8)
    step = np.isin(b, (ord("["), ord("{"))).astype(np.int64) - np.isin(b, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def _no_constant(s: str):
    raise ValueError(f"'{s}' is not a JSON number")


def _finite_float(s: str) -> float:
    v = float(s)
    if not np.isfinite(v):
        raise ValueError(f"number {s[:20]} overflows")
    return v


def _parse_meta(blob: bytes) -> dict[str, Any]:
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Refused(f"model description is corrupt ({e})") from None
    depth = _json_depth(text)
    if depth > limits.MAX_JSON_DEPTH:
        raise Refused(f"model description is nested {depth} levels deep (limit {limits.MAX_JSON_DEPTH})")
    try:
        doc = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except (json.JSONDecodeError, ValueError, RecursionError) as e:
        raise Refused(f"model description is corrupt ({str(e)[:160]})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise Refused("not an mcutrain model file (format tag missing)")
    if doc.get("version") != VERSION:
        v = doc.get("version")
        raise Refused(f"has model format version {str(v)[:20]}; this mcutrain reads version {VERSION}: "
                      "re-export it with a matching mcutrain")
    extra = doc.get("extra_arrays", [])
    if not isinstance(extra, list) or not all(isinstance(k, str) and 0 < len(k) <= limits.MAX_NAME_CHARS
                                              for k in extra) or len(extra) > 2 * limits.MAX_NODES:
        raise Refused("'extra_arrays' must be a list of array names")
    try:
        check_description(doc.get("graph"))
    except GraphError as e:
        raise Refused(f"invalid graph: {e}") from None
    return doc


def _graph_keys(gdesc: dict[str, Any]) -> list[str]:
    return [f"{nd['name']}.{p}" for nd in gdesc["nodes"] for p in nd["params"]]


def _placeholder(h: NpyHeader) -> np.ndarray:
    """An array of the declared shape and dtype that takes no memory (for shape checking)."""
    return np.broadcast_to(np.zeros((), h.dtype), h.shape)


def _load(path: Path) -> ModelFile:
    try:
        z = open_zip(path, ".npz model file")
    except Refused as e:
        raise Refused(f"{e}: re-create it with 'mcutrain pretrain'") from None
    with z:
        members = zip_members(z)
        meta_info = members.get(META_KEY + ".npy")
        if meta_info is None:
            raise Refused(f"is an .npz file but not an mcutrain model (no '{META_KEY}' entry)")
        if meta_info.file_size > limits.MAX_META_BYTES + MAX_NPY_HEADER:
            raise Refused(f"has a {meta_info.file_size:,}-byte model description (limit "
                          f"{limits.MAX_META_BYTES:,})")
        with open_member(z, meta_info) as f:
            h = read_header(f, META_KEY)
            if h.dtype != np.uint8 or len(h.shape) != 1 or h.nbytes > limits.MAX_META_BYTES:
                raise Refused(f"model description must be at most {limits.MAX_META_BYTES:,} bytes of "
                              f"uint8, got {h.dtype} {h.shape}")
            doc = _parse_meta(read_exact(f, h.nbytes, "model description"))
        gdesc = doc["graph"]
        extra_keys = list(dict.fromkeys(doc.get("extra_arrays", [])))
        param_keys = _graph_keys(gdesc)
        if set(extra_keys) & (set(param_keys) | {META_KEY}):
            raise Refused("extra array names collide with parameters")
        headers: dict[str, NpyHeader] = {}
        for key in param_keys + extra_keys:
            info = members.get(key + ".npy")
            if info is None:
                if key in extra_keys:
                    missing = [k for k in extra_keys if k + ".npy" not in members]
                    raise Refused(f"arrays listed but missing: {missing}")
                raise Refused(f"invalid graph: parameter array '{key}' is missing")
            headers[key] = member_header(z, info, key)
        for key in param_keys:
            if headers[key].dtype.kind != "f":
                raise Refused(f"parameter '{key}' has type {headers[key].dtype}; parameters are floats")
        try:
            skeleton = Graph.from_dict(gdesc, {k: _placeholder(headers[k]) for k in param_keys})
        except GraphError as e:
            raise Refused(f"invalid graph: {e}") from None
        check_limits(skeleton)
        extra_bytes = sum(headers[k].nbytes for k in extra_keys)
        bound = 4 * skeleton.num_params() + limits.EXTRA_BYTES_SLACK
        if extra_bytes > bound:
            raise Refused(f"its extra arrays hold {extra_bytes:,} bytes, more than a model of "
                          f"{skeleton.num_params():,} parameters needs (limit {bound:,})")
        data: dict[str, np.ndarray] = {}
        for key in param_keys + extra_keys:
            data[key] = member_data(z, members[key + ".npy"], headers[key], key)
    try:
        graph = Graph.from_dict(gdesc, data)
    except GraphError as e:
        raise Refused(f"invalid graph: {e}") from None
    meta = {k: v for k, v in doc.items() if k not in ("format", "version", "graph", "extra_arrays")}
    return ModelFile(graph, meta, {k: data[k] for k in extra_keys})


def check_limits(graph: Graph) -> None:
    """Refuse a graph larger than `mcutrain.limits` allows (total parameters, MACs per sample)."""
    n = graph.num_params()
    if n > limits.MAX_PARAMS:
        raise ModelFileError(f"the model has {n:,} parameters, more than the limit {limits.MAX_PARAMS:,} "
                             "(mcutrain.limits); it cannot be a microcontroller model")
    m = graph.total_macs()
    if m > limits.MAX_MACS:
        raise ModelFileError(f"the model needs {m:,} multiply-accumulates per sample, more than the "
                             f"limit {limits.MAX_MACS:,} (mcutrain.limits)")


def load(path: str | Path) -> ModelFile:
    """Read a model file written by `save`; refuse anything else with a clear message.

    Reads only what the graph references, checks every header against the graph before
    reading data, and never unpickles (see the module docstring for the bounds).
    """
    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"model file '{path}' does not exist")
    if not path.is_file():
        raise ModelFileError(f"'{path}' is not a regular file; give a model file (.npz)")
    try:
        return _load(path)
    except Refused as e:
        msg = str(e)
        sep = " " if msg.startswith(("is ", "has ", "not ")) else ": "
        raise ModelFileError(f"'{path}'{sep}{msg}") from None
    except ModelFileError as e:
        raise ModelFileError(f"'{path}': {e}") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as e:
        # zlib/CRC errors while reading a member, an unsupported compression method
        raise ModelFileError(f"'{path}' is not a readable .npz model file ({str(e)[:160]}); it may be "
                             "truncated or corrupt: re-create it with 'mcutrain pretrain'") from None
