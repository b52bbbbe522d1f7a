"""Cross-build C for an MCU target, so that "it links" means "it fits".

Cortex-M targets build with arm-none-eabi-gcc and newlib, RISC-V targets with
riscv64-unknown-elf-gcc (multilib: `-march=rv32imc -mabi=ilp32`) and picolibc. The linker script
(`cortexm.ld` or `riscv.ld`, filled in per target) places code at the board's flash address
and data at its RAM address, with the *target chip's* sizes as region lengths; heap and stack are
fixed-size sections inside RAM. An image too large for the chip fails with `LinkOverflowError`
naming the region and the number of bytes over. Every program is linked with the architecture's
startup file (`startup/startup.c` or `startup/startup_riscv.c`: reset, FPU enable, semihosting
stdio, argc/argv, markers), so a test or a generated library only supplies `main`.

Example:
    >>> from mcutrain.mcu import build
    >>> from mcutrain.targets import get_target
    >>> b = build(["prog.c"], get_target("cortex-m4"), "out/prog.elf")   # doctest: +SKIP
    >>> b.sizes.flash_bytes, b.sizes.ram_bytes                            # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template

from mcutrain.buildflags import (
    C_STD_FLAGS,
    CROSS_OPT,
    OPT_LEVEL,
    TRAIN_FLAGS,
    core_flags,
    link_flags,
)
from mcutrain.io import atomic_write_bytes
from mcutrain.targets import Target, get_target

APT_INSTALL = ("apt-get install -y --no-install-recommends gcc-arm-none-eabi libnewlib-arm-none-eabi "
               "qemu-system-arm")
"""The Debian/Ubuntu command that installs everything this package drives for Cortex-M."""

APT_INSTALL_RISCV = ("apt-get install -y --no-install-recommends gcc-riscv64-unknown-elf "
                     "picolibc-riscv64-unknown-elf qemu-system-misc")
"""The same for RISC-V targets: the cross compiler, picolibc and qemu-system-riscv32."""

TOOL_PREFIX = {"arm": "arm-none-eabi-", "riscv": "riscv64-unknown-elf-"}
"""GNU tool name prefix per architecture (`targets.core_arch`)."""

INSTALL = {"arm": APT_INSTALL, "riscv": APT_INSTALL_RISCV}
"""What to install when an architecture's tools are missing."""

STARTUP_SOURCE = {"arm": "startup.c", "riscv": "startup_riscv.c"}
LINKER_TEMPLATE = {"arm": "cortexm.ld", "riscv": "riscv.ld"}

ELF_MACHINE = {0x28: "arm", 0xF3: "riscv"}
"""ELF e_machine values (EM_ARM, EM_RISCV) -> architecture, so a tool reading an image needs no target."""

DEFAULT_STACK_BYTES = 8 * 1024
"""Stack reserved in RAM. Newlib's printf with semihosting peaks near 0.7 KB (docs/mcu.md)."""

DEFAULT_HEAP_BYTES = 8 * 1024
"""Heap reserved in RAM for newlib's stdio: ~1.4 KB for stdout, +1.4 KB per open file (docs/mcu.md)."""

class ToolchainMissingError(RuntimeError):
    """A cross toolchain (or QEMU) is not installed; the message says how to install it."""


class BuildError(RuntimeError):
    """Compiling or linking failed; `output` holds the compiler's messages."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message if not output else f"{message}\n{output}")
        self.output = output


class LinkOverflowError(BuildError):
    """The image does not fit the target: `overflows` maps each region (FLASH, RAM) to the bytes
    it is over; `region`/`overflow_bytes` name the worst one."""

    def __init__(self, target: Target, overflows: dict[str, int], output: str) -> None:
        parts = []
        for region, nbytes in overflows.items():
            size = target.link_flash_bytes if region == "FLASH" else target.link_ram_bytes
            parts.append(f"region {region} ({size} bytes) overflowed by {nbytes} bytes")
        self.region, self.overflow_bytes = max(overflows.items(), key=lambda kv: kv[1])
        what = " and ".join("Flash" if r == "FLASH" else "RAM" for r in overflows)
        msg = (f"image does not fit target {target.name!r}: {'; '.join(parts)}; shrink the model or the "
               f"trainable part, or pick a target with more {what}")
        RuntimeError.__init__(self, msg)
        self.output = output
        self.overflows = dict(overflows)


@dataclass(frozen=True)
class Toolchain:
    """Paths of one architecture's GNU cross tools."""

    gcc: str
    size: str
    nm: str
    objdump: str


def find_toolchain(arch: str = "arm") -> Toolchain:
    """Locate the {gcc,size,nm,objdump} of `arch` ('arm' or 'riscv') on PATH, or say how to install them."""
    names = {k: f"{TOOL_PREFIX[arch]}{k}" for k in ("gcc", "size", "nm", "objdump")}
    found = {k: shutil.which(v) for k, v in names.items()}
    missing = [names[k] for k, v in found.items() if v is None]
    if arch == "riscv" and not missing and not picolibc_installed(str(found["gcc"])):
        missing = ["picolibc (picolibc.specs)"]
    if missing:
        what = ("the ARM cross toolchain with newlib" if arch == "arm"
                else "the RISC-V cross toolchain with picolibc")
        raise ToolchainMissingError(f"{', '.join(missing)} not found on PATH; install {what} "
                                    f"(Debian/Ubuntu, as root): {INSTALL[arch]}")
    return Toolchain(**found)  # type: ignore[arg-type]


def picolibc_installed(gcc: str) -> bool:
    """Whether `gcc` finds picolibc's specs file (the RISC-V C library is a separate package)."""
    try:
        r = subprocess.run([gcc, "-print-file-name=picolibc.specs"], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return os.path.isabs(r.stdout.strip())


def elf_arch(elf: str | Path) -> str:
    """'arm' or 'riscv' from an ELF header, so disassembly and sizes pick the right tools."""
    with open(elf, "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF" or len(head) < 20:
        raise BuildError(f"{elf} is not an ELF file")
    machine = int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")
    if machine not in ELF_MACHINE:
        raise BuildError(f"{elf}: ELF machine {machine:#x} is neither Arm nor RISC-V")
    return ELF_MACHINE[machine]


def toolchain_for_elf(elf: str | Path) -> Toolchain:
    """The tools that read `elf` (objdump, nm, size of its architecture)."""
    return find_toolchain(elf_arch(elf))


def startup_dir() -> Path:
    """Directory of startup.c and mt_board.h (add it to include dirs to use the markers)."""
    return Path(str(resources.files("mcutrain.mcu") / "startup"))


def linker_script(target: Target, stack_bytes: int = DEFAULT_STACK_BYTES,
                  heap_bytes: int = DEFAULT_HEAP_BYTES) -> str:
    """The linker script text for `target`: board addresses, chip sizes, heap and stack."""
    if stack_bytes < 256 or stack_bytes % 8:
        raise ValueError(f"stack_bytes={stack_bytes}: must be a multiple of 8 and at least 256")
    if heap_bytes < 0 or heap_bytes % 8:
        raise ValueError(f"heap_bytes={heap_bytes}: must be a non-negative multiple of 8")
    template = Template((resources.files("mcutrain.mcu") / LINKER_TEMPLATE[target.arch]).read_text())
    board = target.board
    return template.substitute(
        flash_origin=f"0x{board.flash_origin:08x}", flash_bytes=target.link_flash_bytes,
        ram_origin=f"0x{board.ram_origin:08x}", ram_bytes=target.link_ram_bytes,
        stack_bytes=stack_bytes, heap_bytes=heap_bytes)


@dataclass(frozen=True)
class SectionSizes:
    """What an image occupies, in bytes (from arm-none-eabi-size).

    `text` is code plus constants (Flash only), `data` initialised variables (Flash for the
    initial values *and* RAM), `bss` zeroed variables, `heap` and `stack` the reserved sections.
    """

    text: int
    data: int
    bss: int
    heap: int
    stack: int

    @property
    def flash_bytes(self) -> int:
        return self.text + self.data

    @property
    def ram_bytes(self) -> int:
        return self.data + self.bss + self.heap + self.stack


@dataclass(frozen=True)
class BuildResult:
    """A linked image and what it needs."""

    elf: Path
    target: Target
    sizes: SectionSizes
    command: list[str] = field(default_factory=list)


_OVERFLOW_RE = re.compile(r"region [`']?(\w+)'? overflowed by (\d+) bytes")


def build_timeout() -> float:
    """Seconds one cross-compiler run may take: MCUTRAIN_BUILD_TIMEOUT, else 900."""
    raw = os.environ.get("MCUTRAIN_BUILD_TIMEOUT", "900")
    try:
        value = float(raw)
    except ValueError:
        raise BuildError(f"MCUTRAIN_BUILD_TIMEOUT={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise BuildError(f"MCUTRAIN_BUILD_TIMEOUT={raw!r} must be positive")
    return value


def build(sources: Sequence[str | Path], target: str | Target, out: str | Path, *,
          include_dirs: Sequence[str | Path] = (), defines: Sequence[str] = (), opt: str = CROSS_OPT,
          extra_cflags: Sequence[str] = (), stack_bytes: int = DEFAULT_STACK_BYTES,
          heap_bytes: int = DEFAULT_HEAP_BYTES, startup: bool = True,
          timeout: float | None = None) -> BuildResult:
    """Compile and link C `sources` for `target` into the ELF `out`.

    `defines` are `NAME` or `NAME=VALUE`; `opt` is the optimisation flag (e.g. "-O2", "-Os").
    The linker script is written beside the ELF (`<out>.ld`). On failure nothing is left at
    `out`: a compile error raises `BuildError`, an image too big for the target raises
    `LinkOverflowError` (region and overflow in bytes). `timeout` (default: the environment's
    MCUTRAIN_BUILD_TIMEOUT, else 900 s) bounds one compiler run; a busy machine can need most of it.
    """
    target = get_target(target)
    tools = find_toolchain(target.arch)
    out = Path(out)
    srcs = [Path(s) for s in sources]
    for s in srcs:
        if not s.is_file():
            raise BuildError(f"source file {s} does not exist")
    if not OPT_LEVEL.fullmatch(opt):
        raise ValueError(f"opt={opt!r}: expected one of -O0 -O1 -O2 -O3 -Os -Oz -Og -Ofast")
    out.parent.mkdir(parents=True, exist_ok=True)
    ld = out.with_suffix(out.suffix + ".ld")
    script = linker_script(target, stack_bytes, heap_bytes)
    atomic_write_bytes(ld, lambda f: f.write(script.encode()))
    if startup:
        srcs.append(startup_dir() / STARTUP_SOURCE[target.arch])
        include_dirs = [*include_dirs, startup_dir()]
    tmp = out.with_name(f".{out.name}.tmp")
    cmd = [tools.gcc, *core_flags(target), opt, *C_STD_FLAGS, *TRAIN_FLAGS, *extra_cflags,
           *(f"-I{d}" for d in include_dirs), *(f"-D{d}" for d in defines),
           *map(str, srcs), f"-T{ld}", *link_flags(target), "-o", str(tmp)]
    limit = build_timeout() if timeout is None else timeout
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as e:
        tmp.unlink(missing_ok=True)
        raise BuildError(f"building {out.name} for {target.name} took longer than {limit:g} s; the "
                         "machine may be busy: retry, or raise MCUTRAIN_BUILD_TIMEOUT (seconds)",
                         str(e.stderr or "")) from None
    if proc.returncode != 0:
        if tmp.exists():
            tmp.unlink()
        output = proc.stderr + proc.stdout
        overflows = {region: int(nbytes) for region, nbytes in _OVERFLOW_RE.findall(output)}
        if overflows:
            raise LinkOverflowError(target, overflows, output)
        raise BuildError(f"building {out.name} for {target.name} failed", output)
    os.replace(tmp, out)
    return BuildResult(elf=out, target=target, sizes=section_sizes(out, tools), command=cmd)


def section_sizes(elf: str | Path, tools: Toolchain | None = None) -> SectionSizes:
    """Sizes of an image from `size` (Berkeley totals, heap/stack from -A)."""
    tools = tools or toolchain_for_elf(elf)
    berkeley = subprocess.run([tools.size, "-B", str(elf)], capture_output=True, text=True, check=True)
    text, data, bss = (int(v) for v in berkeley.stdout.splitlines()[1].split()[:3])
    sysv = subprocess.run([tools.size, "-A", str(elf)], capture_output=True, text=True, check=True)
    named = {}
    for line in sysv.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit():
            named[parts[0]] = int(parts[1])
    heap, stack = named.get(".heap", 0), named.get(".stack", 0)
    return SectionSizes(text=text, data=data, bss=bss - heap - stack, heap=heap, stack=stack)
