"""Which symbols of a linked image belong to the generated library, and their RAM and Flash.

`mcutrain run` reports the library's share of its emulated image apart from the harness's (its
data buffers, newlib's stdio and heap), because the board's budget is the library's
(`plan.budget`); benchmark `mcu` reports the same split. A question about object files,
answered with the cross toolchain's `gcc -c` and `nm`: symbols are matched by the names
`model.c` and the runtime sources define.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from pathlib import Path

from mcutrain.buildflags import C_STANDARD, CROSS_OPT, REF_KERNELS, SECTION_FLAGS, core_flags, libc_flags
from mcutrain.io import atomic_write_bytes
from mcutrain.mcu.plugin import cache_dir
from mcutrain.mcu.toolchain import find_toolchain

NAMES_FORMAT = 1
"""Version of the cached name tables (`stored_runtime_symbols`): raise it when the table changes meaning."""

_RUNTIME_NAMES: dict[tuple[str, bool, str, str], dict[str, str]] = {}


def runtime_names(lib: Path, target, kernels: str) -> frozenset[str]:
    """Symbols the runtime sources define for this build kind (compiled to objects once per kind).

    The runtime is package data, so its names are cached per (core, float ABI, kernels,
    `runtime_kind`); `model.c` differs per library and is read by `model_names`.
    """
    return frozenset(runtime_symbols(lib, target, kernels))


def runtime_kind(lib: Path) -> str:
    """What makes two libraries' runtimes define different symbols: their file names (a `--prefix`
    renames them) and the configuration header (the rounding mode selects other kernels)."""
    rt = lib / "runtime"
    config = b"".join(p.read_bytes() for p in sorted(rt.glob("*mt_config.h")))
    names = "\n".join(sorted(p.name for p in rt.iterdir()))
    return hashlib.sha256(names.encode() + b"\0" + config).hexdigest()


def runtime_symbols(lib: Path, target, kernels: str) -> dict[str, str]:
    """Symbol -> the runtime source (file stem) that defines it, static helpers included."""
    lib = Path(lib).resolve()      # the compiler runs in a scratch directory
    key = (target.core, target.fpu, kernels, runtime_kind(lib))
    if key not in _RUNTIME_NAMES:
        _RUNTIME_NAMES[key] = stored_runtime_symbols(lib, target, kernels)
    return _RUNTIME_NAMES[key]


def stored_runtime_symbols(lib: Path, target, kernels: str) -> dict[str, str]:
    """`runtime_symbols` through a file cache (`$MCUTRAIN_CACHE/runtime-symbols`).

    Why: finding the names compiles the whole runtime a second time, about as long as the build
    itself; test workers running side by side and every later run on the machine share one compile
    per kind. The key is the table's format, the compiler (path, size, mtime), its flags and the
    bytes of every header and runtime source the library holds, so any change compiles again; a
    cache that cannot be read or written is skipped.
    """
    lib = Path(lib).resolve()
    tools = find_toolchain(target.arch)
    flags = [*core_flags(target), *libc_flags(target), CROSS_OPT, *C_STANDARD, *SECTION_FLAGS,
             f"-I{lib}", f"-I{lib / 'runtime'}"] + ([f"-D{REF_KERNELS}"] if kernels == "ref" else [])
    srcs = sorted((lib / "runtime").glob("*.c"))
    h = hashlib.sha256()
    st = Path(tools.gcc).stat()
    key = [NAMES_FORMAT, tools.gcc, st.st_size, st.st_mtime_ns,
           *(f.replace(str(lib), "<lib>") for f in flags)]
    for part in key:
        h.update(f"{part}\0".encode())
    for f in sorted([*lib.glob("*.h"), *(lib / "runtime").glob("*.[ch]")]):
        h.update(f.relative_to(lib).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    path = cache_dir() / "runtime-symbols" / f"{h.hexdigest()[:24]}.json"
    try:
        table = json.loads(path.read_text())
        if isinstance(table, dict) and all(isinstance(v, str) for v in table.values()):
            return table
    except (OSError, ValueError):
        pass
    with tempfile.TemporaryDirectory(prefix="mt-names-") as tmp:
        subprocess.run([tools.gcc, *flags, "-c", *map(str, srcs)], cwd=tmp, check=True, capture_output=True)
        out = subprocess.run([tools.nm, "--defined-only", *sorted(str(p) for p in Path(tmp).glob("*.o"))],
                             check=True, capture_output=True, text=True).stdout
    table: dict[str, str] = {}
    stem = ""
    for line in out.splitlines():        # nm of several objects: "file.o:" opens each one's symbols
        if line.endswith(".o:"):
            stem = Path(line[:-1]).stem
        elif len(line.split()) == 3:
            table.setdefault(line.split()[-1], stem)
    try:
        atomic_write_bytes(path, lambda f: f.write(json.dumps(table).encode()))
    except OSError:
        pass
    return table


def model_names(lib: Path, target) -> set[str]:
    lib = Path(lib).resolve()
    tools = find_toolchain(target.arch)
    with tempfile.TemporaryDirectory(prefix="mt-names-") as tmp:
        obj = Path(tmp) / "model.o"
        subprocess.run([tools.gcc, *core_flags(target), *libc_flags(target), CROSS_OPT, *C_STANDARD,
                        *SECTION_FLAGS,
                        f"-I{lib}", f"-I{lib / 'runtime'}", "-c", str(lib / "model.c"),
                        "-o", str(obj)], check=True, capture_output=True)
        out = subprocess.run([tools.nm, "--defined-only", str(obj)], check=True, capture_output=True,
                             text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3}


def library_footprint(elf: Path, lib: Path, target, kernels: str) -> dict[str, int]:
    """RAM and Flash bytes of the library's own symbols in the linked image (harness and libc excluded).

    Symbols are matched by name: those `model.c` and the runtime define. Anonymous constants
    (string literals, jump tables outside functions) are not attributed; the library has few.
    """
    names = model_names(lib, target) | runtime_names(lib, target, kernels)
    out = subprocess.run([find_toolchain(target.arch).nm, "-S", "--defined-only", str(elf)], check=True,
                         capture_output=True, text=True).stdout
    ram_origin = target.board.ram_origin
    ram = flash = arena = 0
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 4 or parts[3] not in names:
            continue
        addr, size, kind = int(parts[0], 16), int(parts[1], 16), parts[2].lower()
        if addr >= ram_origin and kind in "bd":
            ram += size
            arena += size if parts[3] == "model_arena" else 0
        if addr < ram_origin or kind == "d":
            flash += size
    return {"ram": ram, "flash": flash, "arena": arena}
