"""A small C program against the shipped runtime headers, built on the host with the sanitizers.

The requantization tests feed it arguments on stdin and compare what the C functions print
with the Python rule; the DSP forms build with their portable emulation (`MT_EMULATE_DSP`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from mcutrain.buildflags import HOST_SANITIZE
from mcutrain.mcu.hostbuild import find_host_cc


def build_probe(tmp_path: Path, source: str, training: bool = False) -> Path:
    """Write a DSP build's runtime (`training`: with the training kernels' folders) and `source`
    under `tmp_path`, compile them warning-free."""
    from mcutrain.codegen.runtime_files import runtime_files

    rt = tmp_path / "rt"
    rt.mkdir()
    for name, text in runtime_files("dsp", training=training).items():
        (rt / name).write_text(text)
    (tmp_path / "probe.c").write_text(source)
    exe = tmp_path / "probe"
    subprocess.run([find_host_cc(), "-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-DMT_EMULATE_DSP",
                    *HOST_SANITIZE, f"-I{rt}", str(tmp_path / "probe.c"), "-o", str(exe)], check=True)
    return exe
