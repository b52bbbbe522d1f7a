"""A sweep's folder: `results.jsonl` (one line per finished cell), `timings.jsonl`, `sweep.json`.

A line is appended whole or not at all: one `write` of the complete line on a file opened for
appending, then `fsync`; a process killed inside that write can leave only a torn last line without
its newline, which the reader ignores and the next append cuts off before writing. So an
interrupted sweep's file holds exactly the cells that finished, and a rerun skips them.

Only the sweep's driver writes these files (workers return their outcomes to it), so no two
processes append at once. The last line of a key wins: a failed cell that is run again and
succeeds replaces its failure.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mcutrain.io import atomic_write_bytes, json_plain

RESULTS = "results.jsonl"
TIMINGS = "timings.jsonl"
MANIFEST = "sweep.json"


def is_sweep_dir(path: str | Path) -> bool:
    """Whether `path` is a sweep's output folder (it holds `results.jsonl`)."""
    return (Path(path) / RESULTS).is_file()


def line_text(obj: dict[str, Any]) -> str:
    """One JSON line, keys in a fixed order: the same result gives the same bytes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=json_plain) + "\n"


def append_line(path: Path, obj: dict[str, Any]) -> None:
    """Append `obj` as one whole line (see the module docstring)."""
    data = line_text(obj).encode()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)
    try:
        size = os.fstat(fd).st_size
        if size:
            tail = os.pread(fd, min(size, 1 << 20), max(0, size - (1 << 20)))
            if not tail.endswith(b"\n"):     # a torn line of a killed write: never a finished cell
                os.ftruncate(fd, size - len(tail) + tail.rfind(b"\n") + 1)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every whole line of a JSON-lines file (a torn last line left out); [] when there is none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    out = []
    for line in text.split("\n")[:-1] if not text.endswith("\n") else text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return [o for o in out if isinstance(o, dict) and "key" in o]


def latest(out_dir: str | Path) -> dict[str, dict[str, Any]]:
    """{cell key: its last result line} of a sweep folder."""
    return {line["key"]: line for line in read_lines(Path(out_dir) / RESULTS)}


def write_manifest(out_dir: str | Path, doc: dict[str, Any]) -> None:
    """`sweep.json`: the sweep's name, axes, target and cell keys in order, for `mcutrain report`."""
    text = (json.dumps(doc, indent=1, default=json_plain) + "\n").encode()
    atomic_write_bytes(Path(out_dir) / MANIFEST, lambda f: f.write(text))


def read_manifest(out_dir: str | Path) -> dict[str, Any]:
    try:
        doc = json.loads((Path(out_dir) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}
