"""Cache of decoded dataset arrays, so a dataset loads in well under a second after the first time.

Arrays are kept as uncompressed `.npz` files (no pickle) in the cache directory,
named by a key that changes whenever the source changes (file path, size and
modification time, or generator version and arguments). Files are written
atomically; a cache that cannot be written or read is simply skipped.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import numpy as np

from mcutrain.io import atomic_write_bytes


def cache_dir() -> Path:
    """`$MCUTRAIN_CACHE`, else `$XDG_CACHE_HOME/mcutrain`, else `~/.cache/mcutrain`."""
    if os.environ.get("MCUTRAIN_CACHE"):
        return Path(os.environ["MCUTRAIN_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mcutrain"


def files_key(paths: list[Path], extra: str = "") -> str:
    """A short key for a set of source files: their resolved paths, sizes and mtimes."""
    h = hashlib.sha256(extra.encode())
    for p in paths:
        st = p.stat()
        h.update(f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _path(name: str, key: str) -> Path:
    return cache_dir() / name / f"arrays-{key}.npz"


def load_arrays(name: str, key: str) -> dict[str, np.ndarray] | None:
    """The cached arrays for (name, key), or None when absent or unreadable."""
    path = _path(name, key)
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError):
        return None


def save_arrays(name: str, key: str, arrays: dict[str, np.ndarray]) -> Path | None:
    """Store arrays for (name, key), replacing older entries of `name`; None if not writable."""
    path = _path(name, key)
    try:
        atomic_write_bytes(path, lambda f: np.savez(f, **arrays))
        for old in path.parent.glob("arrays-*.npz"):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        return None
    return path
