"""Build the insncount QEMU plugin from its shipped C source, once, into the user's cache.

The plugin is compiled with the host C compiler on first use and cached under
`$MCUTRAIN_CACHE` (default `~/.cache/mcutrain`) in a file named after the hash of its source,
so an updated source rebuilds and concurrent first uses do not race (atomic rename).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

from mcutrain.mcu.toolchain import ToolchainMissingError

HOST_CFLAGS = ("-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden")


def cache_dir() -> Path:
    """Where built helpers live: `$MCUTRAIN_CACHE`, else `~/.cache/mcutrain`."""
    env = os.environ.get("MCUTRAIN_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mcutrain"


def plugin_source() -> bytes:
    return (resources.files("mcutrain.mcu") / "insncount" / "insncount.c").read_bytes()


def plugin_path(rebuild: bool = False) -> Path:
    """Path of the built insncount plugin (`.so`), building it first if needed."""
    src = plugin_source()
    digest = hashlib.sha256(src).hexdigest()[:16]
    out = cache_dir() / "insncount" / f"insncount-{digest}.so"
    if out.is_file() and not rebuild:
        return out
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ToolchainMissingError("no host C compiler (cc/gcc) to build the instruction-count plugin; "
                                    "install one (Debian/Ubuntu: apt-get install -y gcc)")
    out.parent.mkdir(parents=True, exist_ok=True)
    src_file = out.with_name(f".{out.stem}.{os.getpid()}.c")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    src_file.write_bytes(src)
    try:
        proc = subprocess.run([cc, *HOST_CFLAGS, "-o", str(tmp), str(src_file)],
                              capture_output=True, text=True)
    finally:
        src_file.unlink(missing_ok=True)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"building the insncount plugin with {cc} failed:\n{proc.stderr}")
    os.replace(tmp, out)
    return out
