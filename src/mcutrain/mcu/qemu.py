"""Run a Cortex-M ELF under qemu-system-arm with semihosting: argv in, exit code and stdout out.

The guest talks to the host through Arm semihosting (`bkpt 0xab`): its stdout is QEMU's stdout,
and it opens host files by path (relative paths resolve against `cwd`), which is how training
data goes in and weight dumps come out. The guest's `exit(status)` becomes QEMU's exit status
(newlib uses the SYS_EXIT_EXTENDED semihosting call, which QEMU 7.2 supports).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mcutrain.mcu.targets import Target, get_target
from mcutrain.mcu.toolchain import APT_INSTALL, ToolchainMissingError

MAX_CMDLINE_BYTES = 1023
"""startup.c reads at most this much command line (program name and arguments, space separated)."""


class QemuError(RuntimeError):
    """QEMU could not run the image (bad ELF, bad plugin, unknown machine, ...)."""


class QemuTimeoutError(QemuError):
    """The guest did not exit within the timeout; `stdout` holds what it printed so far."""

    def __init__(self, message: str, stdout: str) -> None:
        super().__init__(message)
        self.stdout = stdout


@dataclass(frozen=True)
class RunResult:
    """What a guest run produced."""

    exit_code: int
    stdout: str
    stderr: str
    seconds: float


def find_qemu() -> str:
    """Path of qemu-system-arm, or a `ToolchainMissingError` saying how to install it."""
    path = shutil.which("qemu-system-arm")
    if path is None:
        raise ToolchainMissingError(
            f"qemu-system-arm not found on PATH; install it (Debian/Ubuntu, as root): {APT_INSTALL}")
    return path


def _escape(arg: str) -> str:
    """QEMU option values use ',' as separator; a literal comma is written ',,'."""
    return arg.replace(",", ",,")


def qemu_command(elf: str | Path, target: str | Target, args: Sequence[str] = (),
                 plugin: str | None = None) -> list[str]:
    """The qemu-system-arm command line that runs `elf` on the board of `target`.

    `args` become the guest's argv[1:] (argv[0] is the ELF's file name); they may not contain
    spaces, because the semihosting command line is one space-separated string. `plugin` is a
    `-plugin` value ("path.so,key=value,...").
    """
    target = get_target(target)
    elf = Path(elf)
    argv = [elf.name, *map(str, args)]
    for a in argv:
        if not a or any(c.isspace() for c in a):
            raise ValueError(f"guest argument {a!r} is empty or contains whitespace; the semihosting "
                             "command line is split at spaces (pass such data in a file instead)")
    if len(" ".join(argv)) > MAX_CMDLINE_BYTES:
        raise ValueError(f"guest command line is longer than {MAX_CMDLINE_BYTES} bytes; pass long "
                         "data in a file instead")
    semi = ",".join(["enable=on", "target=native", *(f"arg={_escape(a)}" for a in argv)])
    cmd = [find_qemu(), "-machine", target.qemu_machine, "-nographic", "-monitor", "none",
           "-serial", "none", "-semihosting-config", semi, "-kernel", str(elf)]
    if plugin is not None:
        cmd += ["-plugin", plugin]
    return cmd


def run_elf(elf: str | Path, target: str | Target, args: Sequence[str] = (), *,
            cwd: str | Path | None = None, timeout: float = 60.0,
            plugin: str | None = None) -> RunResult:
    """Run `elf` on the QEMU board of `target` and wait for the guest to exit.

    Guest file paths resolve against `cwd` (default: the current directory). Raises
    `QemuTimeoutError` after `timeout` seconds and `QemuError` when QEMU itself fails to start;
    a guest that exits non-zero is *not* an error here: check `exit_code`.

    Example:
        >>> r = run_elf("prog.elf", "cortex-m4", ["in.bin", "out.bin"], cwd=workdir)  # doctest: +SKIP
        >>> r.exit_code, r.stdout                                                         # doctest: +SKIP
    """
    elf = Path(elf)
    if not elf.is_file():
        raise QemuError(f"ELF file {elf} does not exist; build it first (mcutrain.mcu.build)")
    cmd = qemu_command(elf.resolve(), target, args, plugin)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace")
        raise QemuTimeoutError(f"{elf.name} did not exit within {timeout:g} s on "
                               f"{get_target(target).qemu_machine}; raise the timeout or look for an "
                               "endless loop (output so far is in .stdout)", out) from None
    seconds = time.perf_counter() - t0
    stdout = proc.stdout.decode(errors="replace")
    stderr = proc.stderr.decode(errors="replace")
    if proc.returncode != 0 and "qemu-system-arm:" in stderr:
        raise QemuError(f"QEMU failed to run {elf.name}: {stderr.strip()}")
    return RunResult(exit_code=proc.returncode, stdout=stdout, stderr=stderr, seconds=seconds)
