"""Run an MCU ELF under QEMU with semihosting: argv in, exit code and stdout out.

Cortex-M images run on qemu-system-arm's MPS2 boards, RISC-V images on qemu-system-riscv32's
`virt` board (`-bios none`: no firmware, the ELF is the whole program).
The guest talks to the host through semihosting (Arm: `bkpt 0xab`; RISC-V: the
`slli x0,x0,0x1f; ebreak; srai x0,x0,7` sequence): its stdout is QEMU's stdout,
and it opens host files by path (relative paths resolve against `cwd`), which is how training
data goes in and weight dumps come out. The guest's `exit(status)` becomes QEMU's exit status
(newlib and picolibc use the SYS_EXIT_EXTENDED semihosting call, which QEMU 7.2 supports).

Semihosting also offers SYS_SYSTEM (run a host shell command) and opens any host path, so a run
is contained (docs/security.md): QEMU's seccomp sandbox (`SANDBOX`) kills QEMU on any attempt to
start a process; `-chroot` into the run directory (applied by QEMU after the ELF and plugin are
loaded) leaves the guest only the files in it; `unshare` puts QEMU in an empty network
namespace, and `-nic none` unplugs the board's Ethernet, which QEMU otherwise connects to a
user-mode (slirp) network. Root chroots directly; anyone else does it inside a user namespace.
"""

from __future__ import annotations

import contextlib
import functools
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mcutrain.contain import (
    is_root,
    namespace_prefix,
    private_dir,
    run_contained,
    scrubbed_env,
    warn_once,
)
from mcutrain.mcu.toolchain import INSTALL, ToolchainMissingError
from mcutrain.targets import Target, get_target

MAX_CMDLINE_BYTES = 1023
"""startup.c reads at most this much command line (program name and arguments, space separated)."""

SANDBOX = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"
"""QEMU's seccomp filter: no fork/exec (semihosting SYS_SYSTEM then kills QEMU with SIGSYS before
any command runs), no set*id, no obsolete or scheduler/affinity system calls."""

_NO_PEER = re.compile(r"^qemu-system-\w+: warning: nic \S+ has no peer\n?", re.M)
"""What QEMU prints for `-nic none` on boards with on-board Ethernet: expected, not a failure."""


class QemuError(RuntimeError):
    """QEMU could not run the image (bad ELF, bad plugin, unknown machine, ...)."""


class QemuSandboxError(QemuError):
    """QEMU's seccomp sandbox stopped the run: the guest asked for a forbidden host operation."""


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
    containment: tuple[str, ...] = ()
    """The layers this run had: some of "seccomp", "chroot", "netns", "userns" (docs/security.md)."""


QEMU_ARCH = {"qemu-system-arm": "arm", "qemu-system-riscv32": "riscv"}


def find_qemu(binary: str = "qemu-system-arm") -> str:
    """Path of `binary` (qemu-system-arm or -riscv32), or a `ToolchainMissingError` saying how to
    install it."""
    path = shutil.which(binary)
    if path is None:
        raise ToolchainMissingError(
            f"{binary} not found on PATH; install it (Debian/Ubuntu, as root): {INSTALL[QEMU_ARCH[binary]]}")
    return path


def _escape(arg: str) -> str:
    """QEMU option values use ',' as separator; a literal comma is written ',,'."""
    return arg.replace(",", ",,")


@functools.cache
def sandbox_supported(qemu: str) -> bool:
    """Whether this QEMU was built with seccomp (`-sandbox` is parsed before `-version` exits)."""
    try:
        r = subprocess.run([qemu, "-sandbox", "on", "-version"], capture_output=True, timeout=30,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def qemu_command(elf: str | Path, target: str | Target, args: Sequence[str] = (),
                 plugin: str | None = None, *, chroot: str | Path | None = None) -> list[str]:
    """The QEMU command line that runs `elf` on the board of `target`.

    `args` become the guest's argv[1:] (argv[0] is the ELF's file name); they may not contain
    spaces, because the semihosting command line is one space-separated string. `plugin` is a
    `-plugin` value ("path.so,key=value,..."). `chroot` confines the guest's semihosting file
    access to that directory (QEMU needs to be root, or root in a user namespace, for it).
    The seccomp sandbox and `-nic none` are always on (the sandbox only where QEMU has seccomp).
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
    cmd = [find_qemu(target.board.qemu_system), "-machine", target.qemu_machine, "-nographic",
           "-monitor", "none", "-serial", "none", "-semihosting-config", semi, "-kernel", str(elf)]
    if target.arch == "riscv":
        cmd += ["-bios", "none"]
    cmd += ["-nic", "none"]
    if sandbox_supported(cmd[0]):
        cmd += ["-sandbox", SANDBOX]
    else:
        warn_once(f"mcutrain: this {target.board.qemu_system} has no seccomp support (-sandbox); a guest's "
                   "semihosting SYS_SYSTEM is stopped only by the chroot (no shell inside it)")
    if plugin is not None:
        cmd += ["-plugin", plugin]
    if chroot is not None:
        cmd += ["-chroot", str(chroot)]
    return cmd


def _confinement() -> tuple[tuple[str, ...], bool]:
    """The namespace prefix for QEMU and whether `-chroot` can work under it.

    Root can chroot anywhere; an unprivileged QEMU only inside a user namespace, where it is
    root of that namespace. Without either the guest's file access is not confined to the run
    directory, which is said once as a `ContainmentWarning`.
    """
    prefix = namespace_prefix()
    resolved = (shutil.which(prefix[0]) or prefix[0], *prefix[1:]) if prefix else ()
    chroot_ok = is_root() or "--user" in prefix
    if not chroot_ok:
        warn_once("mcutrain: not root and no user namespace: QEMU cannot chroot, so the guest's "
                   "semihosting file access is not confined to the run directory (the seccomp "
                   "sandbox still forbids SYS_SYSTEM); see docs/security.md")
    return resolved, chroot_ok


def _layers(cmd: Sequence[str]) -> tuple[str, ...]:
    """Names of the containment layers present in a command line (for RunResult and tests)."""
    names = {"-sandbox": "seccomp", "-chroot": "chroot", "--net": "netns", "--user": "userns"}
    return tuple(v for k, v in names.items() if k in cmd)


def run_elf(elf: str | Path, target: str | Target, args: Sequence[str] = (), *,
            cwd: str | Path | None = None, timeout: float = 60.0,
            plugin: str | None = None) -> RunResult:
    """Run `elf` on the QEMU board of `target` and wait for the guest to exit.

    Guest file paths resolve against `cwd`, and the guest reaches nothing outside it (QEMU is
    chrooted there; see the module docstring); without `cwd` the guest gets a private empty
    directory that is removed afterwards. Raises `QemuTimeoutError` after `timeout` seconds
    (QEMU's process group is killed, as on Ctrl-C), `QemuSandboxError` when the seccomp sandbox
    stopped a forbidden host operation and `QemuError` when QEMU itself fails to start; a guest
    that exits non-zero is *not* an error here: check `exit_code`.

    Example:
        >>> r = run_elf("prog.elf", "cortex-m4", ["in.bin", "out.bin"], cwd=workdir)  # doctest: +SKIP
        >>> r.exit_code, r.stdout                                                         # doctest: +SKIP
    """
    elf = Path(elf)
    if not elf.is_file():
        raise QemuError(f"ELF file {elf} does not exist; build it first (mcutrain.mcu.build)")
    with contextlib.ExitStack() as stack:
        run_dir = stack.enter_context(private_dir("mt-qemu-")) if cwd is None else Path(cwd).resolve()
        if not run_dir.is_dir():
            raise QemuError(f"run directory {run_dir} does not exist; create it and put the guest's "
                            "input files in it")
        prefix, chroot_ok = _confinement()
        cmd = [*prefix, *qemu_command(elf.resolve(), target, args, plugin,
                                      chroot=run_dir if chroot_ok else None)]
        t0 = time.perf_counter()
        try:
            proc = run_contained(cmd, cwd=run_dir, timeout=timeout, env=scrubbed_env(run_dir))
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace")
            raise QemuTimeoutError(f"{elf.name} did not exit within {timeout:g} s on "
                                   f"{get_target(target).qemu_machine}; raise the timeout or look for "
                                   "an endless loop (output so far is in .stdout)", out) from None
    seconds = time.perf_counter() - t0
    stdout = proc.stdout.decode(errors="replace")
    stderr = _NO_PEER.sub("", proc.stderr.decode(errors="replace"))
    if proc.returncode == -signal.SIGSYS:
        raise QemuSandboxError(f"QEMU's seccomp sandbox stopped {elf.name}: the guest asked the host for "
                               "a forbidden operation (such as semihosting SYS_SYSTEM, which would run "
                               "a host command); the program or the model it was generated from is "
                               f"broken or hostile. Output so far: {stdout.strip()[-500:]}")
    if proc.returncode != 0 and f"{get_target(target).board.qemu_system}:" in stderr:
        raise QemuError(f"QEMU failed to run {elf.name}: {stderr.strip()}")
    return RunResult(exit_code=proc.returncode, stdout=stdout, stderr=stderr, seconds=seconds,
                     containment=_layers(cmd))
