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
using the helpers below.
"""

from __future__ import annotations

import hashlib
import io as _io
import json
import math
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


# ---------------------------------------------------------------- schema helpers


@dataclass(frozen=True)
class ArraySpec:
    """What one saved array must be: dtype, shape and the range of its values.

    Floats must always be finite. `lo`/`hi` bound every element (inclusive);
    `positive` requires > 0 (scales). Arrays of one `group` (e.g. the three
    statistics of a layer, created together at the first step) are present
    together or not at all; `required` arrays always exist.
    """

    dtype: np.dtype
    shape: tuple[int, ...]
    lo: float | None = None
    hi: float | None = None
    positive: bool = False
    required: bool = True
    group: str | None = None

    @classmethod
    def like(cls, a: np.ndarray, **kw: Any) -> ArraySpec:
        """The spec of an array as the live method holds it."""
        return cls(np.dtype(a.dtype), tuple(a.shape), **kw)


def check_arrays(arrays: Mapping[str, np.ndarray], specs: Mapping[str, ArraySpec]) -> list[str]:
    """Problems of `arrays` against `specs`: missing, unknown, dtype, shape, values (vectorized)."""
    problems: list[str] = []
    missing = sorted(k for k, s in specs.items() if s.required and k not in arrays)
    if missing:
        problems.append(f"lacks arrays {_names(missing)}")
    unknown = sorted(set(arrays) - set(specs))
    if unknown:
        problems.append(f"holds arrays this method does not keep: {_names(unknown)}")
    groups: dict[str, list[bool]] = {}
    for key, spec in specs.items():
        if spec.group is not None:
            groups.setdefault(spec.group, []).append(key in arrays)
    broken = sorted(g for g, present in groups.items() if any(present) and not all(present))
    if broken:
        problems.append(f"holds only part of the arrays of {_names(broken)}")
    for key in sorted(set(arrays) & set(specs)):
        problem = _array_problem(arrays[key], specs[key])
        if problem:
            problems.append(f"array '{key}' {problem}")
    return problems


def _array_problem(a: np.ndarray, s: ArraySpec) -> str | None:
    if a.dtype != s.dtype or a.shape != s.shape:
        return f"is {a.dtype} {a.shape}, this model and method need {s.dtype} {s.shape}"
    if a.size == 0:
        return None
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        return "holds NaN or infinite values"
    if a.dtype.kind in "fiu":
        if s.positive and not (a > 0).all():
            return f"must be > 0 (it holds {a.min()})"
        if s.lo is not None and a.min() < s.lo:
            return f"holds {a.min()}, below its least value {s.lo}"
        if s.hi is not None and a.max() > s.hi:
            return f"holds {a.max()}, above its greatest value {s.hi}"
    return None


def _names(keys: Iterable[str], limit: int = 6) -> str:
    keys = list(keys)
    shown = ", ".join(f"'{k}'" for k in keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def conform(got: Any, template: Any, where: str) -> list[str]:
    """Problems of a JSON value against the live method's own value of the same place.

    Objects need the same keys, lists the same length, leaves the same JSON
    type (bool, int, float, str, null); strings must be equal (formats such as
    a qparams dtype) and floats finite. Number lists are checked as arrays.
    """
    if isinstance(template, dict):
        if not isinstance(got, dict):
            return [f"{where} is a {_kind(got)}, expected an object"]
        if set(got) != set(template):
            miss, extra = sorted(set(template) - set(got)), sorted(set(got) - set(template))
            parts = [f"lacks {_names(miss)}"] if miss else []
            parts += [f"has unknown {_names(extra)}"] if extra else []
            return [f"{where} " + "; ".join(parts)]
        return [p for k in template for p in conform(got[k], template[k], f"{where}.{k}")]
    if isinstance(template, list):
        if not isinstance(got, list) or len(got) != len(template):
            return [f"{where} is {_kind(got)}, expected a list of {len(template)}"]
        if template and all(_is_number(v) for v in template):
            return number_list(got, where, kind=type(template[0]))
        return [p for i, (g, t) in enumerate(zip(got, template)) for p in conform(g, t, f"{where}[{i}]")]
    if _kind(got) != _kind(template):
        return [f"{where} is {_kind(got)}, expected {_kind(template)}"]
    if isinstance(template, str) and got != template:
        return [f"{where} is {got[:40]!r}, this model and method have {template!r}"]
    if isinstance(got, float) and not math.isfinite(got):
        return [f"{where} is {got}, not a finite number"]
    return []


def number_list(got: Any, where: str, kind: type = float) -> list[str]:
    """Problems of a JSON list of numbers of one kind (int or float, finite), checked vectorized."""
    if not isinstance(got, list) or not all(type(v) is kind for v in got):
        return [f"{where} is not a list of {kind.__name__} values"]
    if kind is float and got and not np.isfinite(np.asarray(got, np.float64)).all():
        return [f"{where} holds NaN or infinite values"]
    return []


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a float"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return f"a list of {len(v)}"
    return "an object"


def int_in(v: Any, lo: int, hi: int, where: str) -> list[str]:
    """Problems of a JSON integer that must lie in [lo, hi]."""
    if not isinstance(v, int) or isinstance(v, bool):
        return [f"{where} is {_kind(v)}, expected an integer"]
    if not lo <= v <= hi:
        return [f"{where} is {v}, outside [{lo}, {hi}]"]
    return []


def ema_range(d: Any, where: str) -> list[str]:
    """Problems of an EMA range entry {alpha, lo, hi}: alpha in (0, 1], lo <= hi, finite, same shape."""
    if not isinstance(d, dict) or set(d) != {"alpha", "lo", "hi"}:
        return [f"{where} is not an EMA range {{alpha, lo, hi}}"]
    problems = []
    a = d["alpha"]
    if not isinstance(a, float) or not 0.0 < a <= 1.0:
        problems.append(f"{where}.alpha is {a!r}, expected a float in (0, 1]")
    lo, hi = d["lo"], d["hi"]
    if (lo is None) != (hi is None):
        return [*problems, f"{where} has only one of lo and hi"]
    if lo is None:
        return problems
    for name, v in (("lo", lo), ("hi", hi)):
        if isinstance(v, list):
            problems += number_list(v, f"{where}.{name}")
        elif not isinstance(v, float) or not math.isfinite(v):
            problems.append(f"{where}.{name} is {v!r}, expected a finite float")
    if problems:
        return problems
    lo_a, hi_a = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    if lo_a.shape != hi_a.shape:
        return [f"{where}: lo and hi differ in length"]
    if not (lo_a <= hi_a).all():
        return [f"{where}: lo exceeds hi"]
    return []


QPARAM_ZERO_RANGE = {"int8": (-128, 127), "uint8": (0, 255)}


def qparams_entry(d: Any, where: str) -> list[str]:
    """Value problems of a qparams entry whose structure `conform` checked: scale > 0, zero point in range."""
    problems = []
    scale = np.asarray(d["scale"], np.float64)
    if not (np.isfinite(scale) & (scale > 0)).all():
        problems.append(f"{where}.scale must be finite and > 0")
    lo, hi = QPARAM_ZERO_RANGE.get(d["dtype"], (-(2**31), 2**31 - 1))
    zp = np.asarray(d["zero_point"], np.int64)
    if zp.size and not ((zp >= lo) & (zp <= hi)).all():
        problems.append(f"{where}.zero_point must lie in [{lo}, {hi}] for {d['dtype']}")
    return problems


def raise_problems(problems: list[str], path: str | Path, what: str = "training state") -> None:
    """One StateFileError listing the first problems, or nothing if there are none."""
    if problems:
        shown = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        raise StateFileError(f"'{path}' is not a valid {what} for this model and method: {shown}. "
                             "Resume with the model and settings that wrote it, or use an intact checkpoint")


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
    "ArraySpec",
    "StateFileError",
    "check_arrays",
    "conform",
    "data_sha256",
    "decode_state",
    "ema_range",
    "encode_state",
    "file_sha256",
    "int_in",
    "number_list",
    "qparams_entry",
    "raise_problems",
]
