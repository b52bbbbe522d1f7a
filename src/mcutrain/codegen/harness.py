"""The file-driven driver for a generated library, and host builds of it (gcc, sanitizers).

`harness/main.c` reads raw int8 samples (MODEL_INPUT_SIZE bytes each) from INPUTS, writes raw
int8 logits to LOGITS and, if a third path is given, every layer's output of every sample to
LAYERS (in layer order, sizes from the graph). On the emulated Cortex-M boards the same file
runs with semihosting file I/O and brackets each `model_predict` with the instruction-count
markers (`MT_BOARD` defined), so only inference is counted, never file I/O.

Example:
    >>> exe = build_host(lib_dir, tmp_path / "harness")          # doctest: +SKIP
    >>> logits = run_host(exe, x_q, num_classes=10)               # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from mcutrain.buildflags import C_STD_FLAGS, HOST_CHECK_FLAGS, HOST_OPT, HOST_SANITIZE, host_kernel_flags


class HostBuildError(RuntimeError):
    """The host compiler failed; the message holds its diagnostics."""


def find_host_cc() -> str:
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise HostBuildError("no host C compiler found; install one with: apt-get install -y gcc")
    return cc


def _cache_dir() -> Path:
    import os
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
            cmd = [cc, *flags, "-c", str(src), "-o", str(part)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise HostBuildError(f"host build failed ({' '.join(cmd)}):\n{r.stderr}")
            part.replace(obj)  # atomic: a concurrent build never sees half an object
    return objs


def build_host(lib_dir: str | Path, exe: str | Path, sanitize: bool = True, kernels: str = "ref",
               opt: str = HOST_OPT, extra: list[str] | None = None) -> Path:
    """Compile a generated library and its harness with the host compiler into `exe`.

    kernels: 'ref' builds the portable loops; 'dsp' builds the DSP loops with their portable
    emulation (`MT_EMULATE_DSP`), so the DSP code path runs under the host sanitizers.
    """

    lib = Path(lib_dir)
    cc = find_host_cc()
    flags = [*C_STD_FLAGS, *HOST_CHECK_FLAGS, opt, f"-I{lib / 'runtime'}", *host_kernel_flags(kernels)]
    flags += (HOST_SANITIZE if sanitize else []) + list(extra or [])
    objs = runtime_objects(cc, lib / "runtime", flags)
    srcs = [lib / "model.c", lib / "harness" / "main.c"]
    cmd = [cc, *flags, f"-I{lib}", *map(str, srcs), *map(str, objs), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise HostBuildError(f"host build failed ({' '.join(cmd)}):\n{r.stderr}")
    return Path(exe)


def run_host(exe: str | Path, x_q: np.ndarray, num_classes: int, layer_sizes: list[int] | None = None,
             timeout: float = 120.0) -> tuple[np.ndarray, list[np.ndarray] | None]:
    """Run the harness on int8 samples (N, ...); returns logits (N, K) and, if asked, the layers.

    `layer_sizes` (bytes per layer, in layer order) turns on the per-layer dump; the result is
    one (N, size) array per layer.
    """
    from mcutrain.contain import private_dir

    x_q = np.ascontiguousarray(x_q, dtype=np.int8)
    n = len(x_q)
    with private_dir("mt-host-") as d:
        fin, fout, flay = d / "in.bin", d / "out.bin", d / "layers.bin"
        fin.write_bytes(x_q.tobytes())
        args = ["in.bin", "out.bin"] + (["layers.bin"] if layer_sizes else [])
        run_harness(exe, args, d, timeout)
        logits = np.frombuffer(fout.read_bytes(), np.int8).reshape(n, num_classes)
        if not layer_sizes:
            return logits, None
        raw = np.frombuffer(flay.read_bytes(), np.int8).reshape(n, sum(layer_sizes))
        splits = np.cumsum(layer_sizes)[:-1]
        return logits, [a.copy() for a in np.split(raw, splits, axis=1)]


def run_harness(exe: str | Path, args: list[str], run_dir: Path,
                 timeout: float) -> subprocess.CompletedProcess:
    """Run a host harness contained (mcutrain.contain.run_program); its failures as HostBuildError.

    Shared by the inference and training harnesses, so both get the same private directory,
    scrubbed environment, network namespace, unprivileged user and clean-up on timeout.
    """
    from mcutrain.contain import run_program

    name = Path(exe).name
    try:
        r = run_program(exe, args, run_dir, timeout)
    except subprocess.TimeoutExpired:
        raise HostBuildError(f"{name} did not exit within {timeout:g} s; raise the timeout or look for an "
                             "endless loop in the generated code") from None
    if r.returncode != 0:
        out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        raise HostBuildError(f"{name} exited with {r.returncode}:\n{out}\n{err}")
    return r
