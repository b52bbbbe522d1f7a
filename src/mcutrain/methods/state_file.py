"""The training-state file (version 2): container, integrity digest and schema checks.

A state file is what `--checkpoint` writes and `--resume` reads. It is input
from disk, so it is treated as untrusted: a truncated download, a bit flip,
a model file passed by mistake or a deliberately crafted archive must end in
one clear `StateFileError`, never in a traceback or in training that goes on
from nonsense (bool weights, NaN scales, an RNG state of 0).

Layout: one uncompressed `.npz` (a zip of `.npy` members, never pickled):
- `__meta__`: UTF-8 canonical JSON (sorted keys, compact) as uint8 bytes:
  `{"format", "version": 2, "method": method.config(), "state": ..., "loop": ...,
  "run": the run's configuration fingerprint or null}`;
- `__digest__`: ASCII hex sha256 over the JSON bytes and, for every array in
  key order, its key, dtype, shape and bytes;
- `a/<key>`: the method's arrays.

The digest detects accidents (truncation, bit flips, editing one part); it is
no signature, anyone can recompute it. What a crafted file with a valid
digest may hold is bounded by the schema: every array must have the dtype and
shape the live method has for this model and configuration, floats must be
finite, and each method adds its own value ranges (`TrainingMethod.check_state`)
using the helpers of `state_schema`.
"""

from __future__ import annotations

import hashlib
import io as _io
import json
import math
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

STATE_FORMAT = "mcutrain-training-state"
STATE_VERSION = 2
META_KEY = "__meta__"
DIGEST_KEY = "__digest__"
ARRAY_PREFIX = "a/"
MODEL_FORMAT = "mcutrain-model"
"""The model files' format tag (`io.FORMAT`), recognized to say "this is a model file"."""

MAX_FILE_BYTES = 4 << 30
"""Largest state file (and sum of its members' sizes) read at all."""
MAX_MEMBERS = 100_000
MAX_META_BYTES = 64 << 20
MAX_JSON_DEPTH = 32
MAX_JSON_NODES = 2_000_000
MAX_INT = 2**63 - 1
DEFAULT_MAX_STEPS = 2**31 - 1
"""Bound of step counters when the run's total is unknown (the C runtime's counters are 32 bit)."""
TOP_KEYS = ("format", "version", "method", "state", "loop", "run")

# zip and npy parsing raise all of these on damaged input (CRC errors, bad headers, short reads,
# encrypted or unsupported members); each becomes a StateFileError naming the file.
_PARSE_ERRORS = (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile, zlib.error,
                 NotImplementedError, RuntimeError, OverflowError, MemoryError, RecursionError)


class StateFileError(ValueError):
    """A training state that cannot be used; the message says what is wrong and what to do."""


# ---------------------------------------------------------------- writing


def canonical_json(doc: Mapping[str, Any]) -> bytes:
    """The one byte form of a document that the digest covers."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def state_digest(meta_bytes: bytes, arrays: Mapping[str, np.ndarray]) -> str:
    """sha256 over the JSON bytes and every array's key, dtype, shape and bytes, in key order."""
    h = hashlib.sha256(STATE_FORMAT.encode() + b"\0")
    h.update(len(meta_bytes).to_bytes(8, "little"))
    h.update(meta_bytes)
    for key in sorted(arrays):
        a = np.ascontiguousarray(arrays[key])
        head = json.dumps([key, a.dtype.str, list(a.shape)]).encode()
        h.update(len(head).to_bytes(8, "little"))
        h.update(head)
        h.update(a.reshape(-1).view(np.uint8))
    return h.hexdigest()


def encode_state(doc: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> bytes:
    """The file's bytes for `doc` (the JSON part) and the method's arrays."""
    meta = canonical_json(doc)
    payload = {f"{ARRAY_PREFIX}{k}": np.ascontiguousarray(v) for k, v in arrays.items()}
    payload[META_KEY] = np.frombuffer(meta, np.uint8)
    payload[DIGEST_KEY] = np.frombuffer(state_digest(meta, arrays).encode(), np.uint8)
    buf = _io.BytesIO()
    np.savez(buf, **payload)
    return buf.getvalue()


# ---------------------------------------------------------------- reading


def decode_state(path: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(document, arrays) of a state file after the container, version, digest and JSON checks.

    What the arrays and the method part mean is checked later against the
    live method (`check_arrays`, `conform` and the method's `check_state`).
    """
    p = Path(path)
    if not p.exists():
        raise StateFileError(f"'{path}' does not exist: give the file written by --checkpoint")
    if p.is_dir():
        raise StateFileError(f"'{path}' is a directory, not a training state file")
    try:
        size = p.stat().st_size
    except OSError as e:
        raise StateFileError(f"'{path}' cannot be read ({e.strerror or e})") from None
    if size > MAX_FILE_BYTES:
        raise StateFileError(f"'{path}' is {size:,} bytes, more than any training state "
                             f"({MAX_FILE_BYTES:,}); it is not a --checkpoint file")
    try:
        members = _read_members(p)
    except StateFileError:
        raise
    except _PARSE_ERRORS as e:
        raise StateFileError(f"'{path}' is corrupt or not a training state ({type(e).__name__}: "
                             f"{_short(e)}); use an intact file written by --checkpoint") from None
    if META_KEY not in members:
        raise StateFileError(f"'{path}' is an .npz archive but not an mcutrain training state "
                             "(no description entry); give the file written by --checkpoint")
    meta_bytes = _meta_bytes(members.pop(META_KEY), path)
    doc = _parse_json(meta_bytes, path)
    _check_header(doc, path)
    digest = members.pop(DIGEST_KEY, None)
    arrays: dict[str, np.ndarray] = {}
    for name, a in members.items():
        if not name.startswith(ARRAY_PREFIX) or len(name) == len(ARRAY_PREFIX):
            raise StateFileError(f"'{path}' holds an unexpected entry '{name}': corrupt or modified")
        arrays[name[len(ARRAY_PREFIX):]] = a
    if digest is None or digest.dtype != np.uint8 or digest.ndim != 1:
        raise StateFileError(f"'{path}' lacks its integrity digest: corrupt or modified")
    if digest.tobytes() != state_digest(meta_bytes, arrays).encode():
        raise StateFileError(f"'{path}' does not match its integrity digest: the file is corrupt or "
                             "was modified; use an intact checkpoint")
    _check_top(doc, path)
    return doc, arrays


def _short(e: BaseException) -> str:
    text = str(e)
    return text if len(text) <= 160 else text[:157] + "..."


def _read_members(p: Path) -> dict[str, np.ndarray]:
    """Every `.npy` member, refusing pickles and headers whose shape the member's bytes cannot hold.

    The archive must end with its end-of-directory record (what `np.savez` writes): zip readers
    skip trailing bytes, and a state file with data after its end is not one we wrote.
    """
    with open(p, "rb") as f:
        f.seek(max(p.stat().st_size - 22, 0))
        if f.read(4) != b"PK\x05\x06":
            raise StateFileError(f"'{p}' is not a complete training state (no zip end record at the end "
                                 "of the file: truncated, extended or not a --checkpoint file)")
    with zipfile.ZipFile(p) as zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise StateFileError(f"'{p}' has {len(infos):,} entries, more than any training state")
        total = sum(i.file_size for i in infos)
        if total > MAX_FILE_BYTES:
            raise StateFileError(f"'{p}' would unpack to {total:,} bytes, more than any training state")
        out: dict[str, np.ndarray] = {}
        for info in infos:
            if not info.filename.endswith(".npy"):
                raise StateFileError(f"'{p}' holds a non-array entry '{info.filename}': not a training state")
            name = info.filename[:-4]
            if name in out:
                raise StateFileError(f"'{p}' holds entry '{name}' twice: corrupt or modified")
            out[name] = _read_npy(zf.read(info), p, name)
        return out


def _read_npy(data: bytes, p: Path, name: str) -> np.ndarray:
    f = _io.BytesIO(data)
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise StateFileError(f"'{p}': entry '{name}' has an unsupported array format {version}")
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise StateFileError(f"'{p}': entry '{name}' needs pickled objects or a structured dtype "
                             f"({dtype}); training states hold plain numeric arrays only")
    need = math.prod(shape) * dtype.itemsize
    if need != len(data) - f.tell():
        raise StateFileError(f"'{p}': entry '{name}' declares {shape} {dtype} ({need:,} bytes) but holds "
                             f"{len(data) - f.tell():,}: corrupt or modified")
    a = np.frombuffer(data, dtype, offset=f.tell()).reshape(shape, order="F" if fortran else "C")
    return np.ascontiguousarray(a).copy()


def _meta_bytes(a: np.ndarray, path: str | Path) -> bytes:
    if a.dtype != np.uint8 or a.ndim != 1:
        raise StateFileError(f"'{path}': the description entry is {a.dtype} {a.shape}, not bytes: corrupt")
    if a.size > MAX_META_BYTES:
        raise StateFileError(f"'{path}': the description is {a.size:,} bytes, more than any training state")
    return a.tobytes()


def _parse_json(raw: bytes, path: str | Path) -> Any:
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise StateFileError(f"'{path}': the description is not valid JSON ({_short(e)}): corrupt "
                             "or modified") from None
    problem = json_limits(doc)
    if problem:
        raise StateFileError(f"'{path}': the description {problem}: corrupt or modified")
    return doc


def json_limits(doc: Any) -> str | None:
    """Why `doc` exceeds the bounds of a state description (depth, size, integers), or None."""
    stack: list[tuple[Any, int]] = [(doc, 0)]
    nodes = 0
    while stack:
        v, depth = stack.pop()
        nodes += 1
        if depth > MAX_JSON_DEPTH:
            return f"nests deeper than {MAX_JSON_DEPTH} levels"
        if nodes > MAX_JSON_NODES:
            return f"has more than {MAX_JSON_NODES:,} values"
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_INT:
            return f"holds an integer beyond 64 bits ({str(v)[:20]}...)"
    return None


def _check_header(doc: Any, path: str | Path) -> None:
    """Format and version, checked before the digest so old or foreign files get a clear message."""
    if not isinstance(doc, dict):
        raise StateFileError(f"'{path}': the description is a JSON {type(doc).__name__}, not an object: "
                             "not a training state")
    fmt = doc.get("format")
    if fmt == MODEL_FORMAT:
        raise StateFileError(f"'{path}' is a model file, not a training state: --resume takes the file "
                             "written by --checkpoint (pass a model file as MODEL)")
    if fmt != STATE_FORMAT:
        raise StateFileError(f"'{path}' is not an mcutrain training state (format {str(fmt)[:40]!r})")
    version = doc.get("version")
    if version == 1:
        raise StateFileError(f"'{path}' is a version 1 training state: it carries no integrity digest "
                             "and no run configuration, so it cannot be checked; start the run again "
                             f"(this mcutrain writes version {STATE_VERSION})")
    if version != STATE_VERSION:
        raise StateFileError(f"'{path}' is a training state of version {str(version)[:20]}, this mcutrain "
                             f"reads version {STATE_VERSION}: use the mcutrain that wrote it")


def _check_top(doc: dict[str, Any], path: str | Path) -> None:
    keys = set(doc)
    if keys != set(TOP_KEYS):
        raise StateFileError(f"'{path}': the description has keys {sorted(keys)[:10]}, expected "
                             f"{list(TOP_KEYS)}: corrupt or modified")
    for key, kind in (("method", dict), ("state", dict), ("loop", dict)):
        if not isinstance(doc[key], kind):
            raise StateFileError(f"'{path}': '{key}' is a JSON {type(doc[key]).__name__}, not an object")
    if doc["run"] is not None and not isinstance(doc["run"], dict):
        raise StateFileError(f"'{path}': 'run' is a JSON {type(doc['run']).__name__}, not an object")


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes (a model file's identity in the run fingerprint)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def data_sha256(*arrays: np.ndarray | None) -> str | None:
    """sha256 identity of a dataset split (inputs and labels), None without data."""
    if arrays[0] is None:
        return None
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(json.dumps([a.dtype.str, list(a.shape)]).encode())
        h.update(a.reshape(-1).view(np.uint8))
    return h.hexdigest()


__all__ = [
    "STATE_FORMAT",
    "STATE_VERSION",
    "StateFileError",
    "data_sha256",
    "decode_state",
    "encode_state",
    "file_sha256",
]
