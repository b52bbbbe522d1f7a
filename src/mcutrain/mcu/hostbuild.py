"""Host builds of a generated library and its harnesses (gcc, sanitizers), next to the cross builds.

The host build is how every bit-exact test and `mcutrain run --host` execute the generated C:
the runtime compiled once per flag set (it does not depend on the model) and cached, then
model.c and a harness linked against it. `kernels='dsp'` builds the DSP loops with their
portable emulation (`MT_EMULATE_DSP`), so the DSP code path runs under the host sanitizers.

Example:
    >>> exe = build_host(lib_dir, tmp_path / "harness")                   # doctest: +SKIP
    >>> exe = build_host_train(lib_dir, tmp_path / "train")               # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from mcutrain.buildflags import (
    C_STD_FLAGS,
    HOST_CHECK_FLAGS,
    HOST_OPT,
    HOST_SANITIZE,
    TRAIN_FLAGS,
    host_kernel_flags,
)


class HostBuildError(RuntimeError):
    """The host compiler (or a host harness) failed; the message holds its diagnostics."""


def find_host_cc() -> str:
    """The host C compiler (gcc, else cc); HostBuildError saying how to install one."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise HostBuildError("no host C compiler found; install one with: apt-get install -y gcc")
    return cc


def _cache_dir() -> Path:
    root = os.environ.get("MCUTRAIN_CACHE") or Path.home() / ".cache" / "mcutrain"
    return Path(root) / "host-runtime"


def runtime_objects(cc: str, runtime_dir: Path, flags: list[str]) -> list[Path]:
    """Compile the runtime sources once per (sources, flags) and reuse the objects.

    The runtime does not depend on the model, so tests that build many models compile it
    once. Objects are keyed by a hash of every runtime file and the flags, with the runtime's
    own directory left out of the flags: every library carries a copy of the runtime in a
    directory of its own, and keying on that path recompiled all of it for every model.
    """
    key = [f.replace(str(runtime_dir), "<runtime>") for f in flags]
    h = hashlib.sha256(" ".join([cc, *key]).encode())
    files = sorted(runtime_dir.glob("*.[ch]"))
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    out = _cache_dir() / h.hexdigest()[:20]
    srcs = [f for f in files if f.suffix == ".c"]
    objs = [out / (f.stem + ".o") for f in srcs]
    if all(o.exists() for o in objs):
        return objs
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        for src, obj in zip(srcs, objs):
            part = Path(tmp) / obj.name
            _compile([cc, *flags, "-c", str(src), "-o", str(part)])
            part.replace(obj)  # atomic: a concurrent build never sees half an object
    return objs


def _compile(cmd: list[str]) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise HostBuildError(f"host build failed ({' '.join(cmd)}):\n{r.stderr}")


def _host_flags(lib: Path, kernels: str, opt: str, sanitize: bool, extra: list[str]) -> list[str]:
    flags = [*C_STD_FLAGS, *extra, *HOST_CHECK_FLAGS, opt, f"-I{lib / 'runtime'}",
             *host_kernel_flags(kernels)]
    return flags + (HOST_SANITIZE if sanitize else [])


def build_host(lib_dir: str | Path, exe: str | Path, sanitize: bool = True, kernels: str = "ref",
               opt: str = HOST_OPT, extra: list[str] | None = None) -> Path:
    """Compile a generated library and its inference harness (`harness/main.c`) into `exe`.

    kernels: 'ref' builds the portable loops; 'dsp' builds the DSP loops with their portable
    emulation (`MT_EMULATE_DSP`), so the DSP code path runs under the host sanitizers.
    """
    lib = Path(lib_dir)
    cc = find_host_cc()
    flags = _host_flags(lib, kernels, opt, sanitize, []) + list(extra or [])
    objs = runtime_objects(cc, lib / "runtime", flags)
    srcs = [lib / "model.c", lib / "harness" / "main.c"]
    _compile([cc, *flags, f"-I{lib}", *map(str, srcs), *map(str, objs), "-o", str(exe)])
    return Path(exe)


def build_host_train(lib_dir: str | Path, exe: str | Path, sanitize: bool = True, kernels: str = "ref",
                     opt: str = HOST_OPT) -> Path:
    """Compile a generated training library and `harness/train_main.c` (ASan + UBSan) into `exe`."""
    lib = Path(lib_dir)
    cc = find_host_cc()
    flags = _host_flags(lib, kernels, opt, sanitize, TRAIN_FLAGS)
    objs = runtime_objects(cc, lib / "runtime", flags)
    _compile([cc, *flags, f"-I{lib}", str(lib / "model.c"), str(lib / "harness" / "train_main.c"),
              *map(str, objs), "-o", str(exe)])
    return Path(exe)
