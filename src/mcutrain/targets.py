"""MCU targets: the chip a build is sized for and the QEMU board that runs it.

A `Target` names what "it fits" means (the chip's RAM and Flash, checked by the linker) and
where it runs (the MPS2/MPS3 board QEMU emulates for a Cortex-M core, QEMU's `virt` board for a
RISC-V core). The generic targets here are
deliberately large so anything the board can hold links; real boards (rp2040, nrf52840,
stm32f746, imxrt1062, stm32h743, nrf5340, stm32u585, rp2350) come from `targets.toml` beside
this module (`BOARD_TARGETS`) and use the same dataclass (`Target.from_dict`); `get_target`
finds both.

NOTE: this module sits below `plan` and `mcu` and imports neither: the planner sizes a step
for a board's RAM and Flash, the deployment layer links and runs for the same board, and
neither layer has to reach into the other to know what a board is.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

KB = 1024
MB = 1024 * KB


@dataclass(frozen=True)
class Board:
    """Memory of one QEMU MPS2/MPS3 machine as QEMU 7.2 maps it (hw/arm/mps2.c, mps2-tz.c).

    The three Armv7-M FPGA images (AN385, AN386, AN500) map ZBT SSRAM1 (4 MB) at 0x0, where the
    vector table, code and constants go ("flash"), and ZBT SSRAM2&3 (4 MB) at 0x20000000 for
    data, heap and stack ("ram"). Both are plain RAM to QEMU; the split mirrors a real MCU.

    AN505 (Cortex-M33 with TrustZone, Arm AN505 and QEMU's mps2-tz.c) has the same memories
    behind memory protection controllers: SSRAM1 at 0x00000000 and SSRAM2/SSRAM3 (2 MB each,
    contiguous) at 0x28000000, each also seen at its Secure alias (address bit 28 set:
    0x10000000, 0x38000000). The core resets in Secure state with the SAU off and every MPC
    block Secure, and reads its vector table at 0x10000000 (INITSVTOR), so an image runs
    Secure from the Secure aliases and needs no SAU or MPC set-up.
    """

    machine: str
    cpu: str
    flash_origin: int
    flash_bytes: int
    ram_origin: int
    ram_bytes: int
    qemu_system: str = "qemu-system-arm"
    """The QEMU binary that emulates this machine."""


BOARDS: dict[str, Board] = {
    "mps2-an385": Board("mps2-an385", "cortex-m3", 0x0, 4 * MB, 0x20000000, 4 * MB),
    "mps2-an386": Board("mps2-an386", "cortex-m4", 0x0, 4 * MB, 0x20000000, 4 * MB),
    "mps2-an500": Board("mps2-an500", "cortex-m7", 0x0, 4 * MB, 0x20000000, 4 * MB),
    "mps2-an505": Board("mps2-an505", "cortex-m33", 0x10000000, 4 * MB, 0x38000000, 4 * MB),
    # MPS3 AN547 (Cortex-M55 with MVE, SSE-300; hw/arm/mps2-tz.c `an547_raminfo`, hw/arm/armsse.c):
    # the CPU boots from init-svtor 0x0, the 512 KB ITCM ("flash"); data goes to the 4 MB SRAM 2
    # at 0x21000000 ("ram"; the 512 KB DTCM at 0x20000000 and the 2 MB SRAM at 0x01000000 unused).
    "mps3-an547": Board("mps3-an547", "cortex-m55", 0x0, 512 * KB, 0x21000000, 4 * MB),
    # QEMU's riscv32 `virt` (hw/riscv/virt.c): DRAM from 0x80000000 (128 MB by default), where
    # `-bios none -kernel` loads the ELF as linked; the first 4 MB play flash, the next 4 MB RAM.
    "virt": Board("virt", "rv32", 0x80000000, 4 * MB, 0x80400000, 4 * MB, "qemu-system-riscv32"),
}

CORES = ("cortex-m0plus", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")
"""Cores we compile for; each maps to one QEMU board (M0+ code is a subset of the M3's ISA)."""

DEFAULT_MACHINE = {"cortex-m0plus": "mps2-an385", "cortex-m4": "mps2-an386", "cortex-m7": "mps2-an500",
                   "cortex-m33": "mps2-an505", "cortex-m55": "mps3-an547"}

RISCV_CORES = {"rv32imc": False, "rv32imac": False, "rv32imafc": True}
"""RISC-V cores (the ISA string is the core's name) and whether each has single-precision floats.
RISC-V has no DSP extension we use (no P extension on these boards): the portable kernels run."""
CORES += tuple(RISCV_CORES)
DEFAULT_MACHINE.update({core: "virt" for core in RISCV_CORES})


def core_arch(core: str) -> str:
    """'riscv' for a RISC-V core, 'arm' for a Cortex-M: which toolchain, startup and QEMU build for it."""
    return "riscv" if core in RISCV_CORES else "arm"


class TargetError(ValueError):
    """An unknown or inconsistent target; the message lists what is known."""


@dataclass(frozen=True)
class Target:
    """One MCU target: core, clock, memories and features, plus the QEMU machine that runs it.

    Example:
        >>> t = get_target("cortex-m4")
        >>> t.core, t.qemu_machine, t.fpu
        ('cortex-m4', 'mps2-an386', True)
    """

    name: str
    core: str
    clock_hz: int
    ram_bytes: int
    flash_bytes: int
    fpu: bool
    dsp: bool
    qemu_machine: str

    def __post_init__(self) -> None:
        if self.core not in CORES:
            raise TargetError(f"target {self.name!r}: unknown core {self.core!r}; known cores: "
                              f"{', '.join(CORES)}")
        if self.qemu_machine not in BOARDS:
            raise TargetError(f"target {self.name!r}: unknown QEMU machine {self.qemu_machine!r}; "
                              f"known: {', '.join(BOARDS)}")
        if self.core == "cortex-m0plus" and (self.fpu or self.dsp):
            raise TargetError(f"target {self.name!r}: a Cortex-M0+ has neither FPU nor DSP extension")
        if self.core in RISCV_CORES and (self.dsp or self.fpu != RISCV_CORES[self.core]):
            raise TargetError(f"target {self.name!r}: {self.core} has "
                              f"{'an' if RISCV_CORES[self.core] else 'no'} FPU and no DSP extension; "
                              "the ISA string says which (F: single-precision floats)")
        if (self.board.qemu_system == "qemu-system-riscv32") != (self.core in RISCV_CORES):
            raise TargetError(f"target {self.name!r}: QEMU machine {self.qemu_machine!r} cannot run "
                              f"{self.core} code")
        for field_name in ("clock_hz", "ram_bytes", "flash_bytes"):
            if int(getattr(self, field_name)) <= 0:
                raise TargetError(f"target {self.name!r}: {field_name} must be positive")

    @property
    def arch(self) -> str:
        """'arm' or 'riscv' (`core_arch`)."""
        return core_arch(self.core)

    @property
    def board(self) -> Board:
        return BOARDS[self.qemu_machine]

    @property
    def link_ram_bytes(self) -> int:
        """RAM the linker allows: the chip's RAM, but never more than the board can hold."""
        return min(self.ram_bytes, self.board.ram_bytes)

    @property
    def link_flash_bytes(self) -> int:
        """Flash the linker allows: the chip's Flash, but never more than the board can hold."""
        return min(self.flash_bytes, self.board.flash_bytes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, name: str, d: dict[str, Any]) -> Target:
        """Build a target from a table such as one `[targets.NAME]` entry of a TOML file.

        `qemu_machine` defaults to the board for the core; `fpu`/`dsp` default to what the core
        usually has (M4/M7/M33 with both, M0+ with neither, a RISC-V core an FPU only with F).
        """
        known = {"core", "clock_hz", "ram_bytes", "flash_bytes", "fpu", "dsp", "qemu_machine"}
        unknown = set(d) - known
        if unknown:
            raise TargetError(f"target {name!r}: unknown keys {sorted(unknown)}; known: {sorted(known)}")
        missing = {"core", "clock_hz", "ram_bytes", "flash_bytes"} - set(d)
        if missing:
            raise TargetError(f"target {name!r}: missing keys {sorted(missing)}")
        core = d["core"]
        if core not in CORES:
            raise TargetError(f"target {name!r}: unknown core {core!r}; known cores: {', '.join(CORES)}")
        big = core not in ("cortex-m0plus", *RISCV_CORES)
        return cls(name=name, core=core, clock_hz=int(d["clock_hz"]), ram_bytes=int(d["ram_bytes"]),
                   flash_bytes=int(d["flash_bytes"]), fpu=bool(d.get("fpu", RISCV_CORES.get(core, big))),
                   dsp=bool(d.get("dsp", big)),
                   qemu_machine=d.get("qemu_machine", DEFAULT_MACHINE[core]))


TARGETS: dict[str, Target] = {
    t.name: t for t in (
        Target("cortex-m0plus", "cortex-m0plus", 133_000_000, 4 * MB, 4 * MB, False, False, "mps2-an385"),
        Target("cortex-m4", "cortex-m4", 64_000_000, 4 * MB, 4 * MB, True, True, "mps2-an386"),
        Target("cortex-m7", "cortex-m7", 600_000_000, 4 * MB, 4 * MB, True, True, "mps2-an500"),
        Target("cortex-m33", "cortex-m33", 160_000_000, 4 * MB, 4 * MB, True, True, "mps2-an505"),
        Target("cortex-m55", "cortex-m55", 400_000_000, 4 * MB, 512 * KB, True, True, "mps3-an547"),
        Target("rv32imc", "rv32imc", 160_000_000, 4 * MB, 4 * MB, False, False, "virt"),
        Target("rv32imafc", "rv32imafc", 160_000_000, 4 * MB, 4 * MB, True, False, "virt"),
    )
}
"""Generic targets, one per core: memories as large as the QEMU board, so anything runnable links
(the M55's AN547 boots from a 512 KB ITCM, so its code and constants get no more)."""


def parse_targets_toml(text: str) -> dict[str, dict[str, Any]]:
    """The `[targets.NAME]` tables of a targets file, as {NAME: {key: value}}.

    Python 3.11's `tomllib` reads it; on 3.10 a small reader takes the subset the file uses
    (`[targets.NAME]` headers, `key = integer | true | false | "string"`, `#` comments), so the
    package needs no TOML dependency. Anything else in the file is refused with its line number.
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        return _parse_subset(text)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TargetError(f"targets file: {e}") from None
    return dict(doc.get("targets", {}))


_HEADER = re.compile(r"\[targets\.([A-Za-z0-9_-]+)\]$")
_ITEM = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(".*"|true|false|[0-9_]+)$')


def _parse_subset(text: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    table: dict[str, Any] | None = None
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip() if '"' not in raw else raw.strip()
        if not line or line.startswith("#"):
            continue
        if m := _HEADER.match(line):
            table = out.setdefault(m.group(1), {})
        elif (m := _ITEM.match(line)) and table is not None:
            v = m.group(2)
            table[m.group(1)] = v[1:-1] if v.startswith('"') else v == "true" if v in ("true", "false") \
                else int(v.replace("_", ""))
        else:
            raise TargetError(f"targets file line {no}: cannot read {raw.strip()!r}; use [targets.NAME] "
                              "headers and key = integer | true | false | \"string\"")
    return out


def load_targets(text: str | None = None) -> dict[str, Target]:
    """Boards from a targets file's text (default: the package's `targets.toml`)."""
    if text is None:
        text = resources.files("mcutrain").joinpath("targets.toml").read_text()
    return {name: Target.from_dict(name, d) for name, d in parse_targets_toml(text).items()}


BOARD_TARGETS: dict[str, Target] = load_targets()
"""Real boards (rp2040, nrf52840, stm32f746, imxrt1062, stm32h743, nrf5340, ...) from `targets.toml`."""


def all_targets() -> dict[str, Target]:
    """Generic targets first, then the boards."""
    return {**TARGETS, **BOARD_TARGETS}


def get_target(target: str | Target) -> Target:
    """The target called `target` (a `Target` passes through unchanged)."""
    if isinstance(target, Target):
        return target
    known = all_targets()
    try:
        return known[target]
    except KeyError:
        raise TargetError(f"unknown target {target!r}; known targets: {', '.join(known)}") from None


HELIUM_CORES = ("cortex-m55",)
"""Cores with the M-profile Vector Extension, whose DSP builds take the `mve/` twins."""


def helium_target(target: str | Target | None) -> bool:
    """Whether a library for `target` (a name, a Target, or ''/None for any core) is a Helium build."""
    return bool(target) and get_target(target).core in HELIUM_CORES


M0_CORES = ("cortex-m0plus", *RISCV_CORES)
"""Cores whose reference builds take the `m0/` twins: ARMv6-M (MULS only, no SMULL, no divide),
their Thumb-1 assembly; and RV32, whose 32 registers run the twins' portable four-channel C faster
than the reference loops (`mcutrain bench mcu-inference`, small-cnn on rv32imc: 10.81 -> 6.34
instructions/MAC, bit-exact)."""


def m0_target(target: str | Target | None) -> bool:
    """Whether a reference library for `target` (a name, a Target, or ''/None for any core) takes
    the `m0/` twins (its core is in `M0_CORES`)."""
    return bool(target) and get_target(target).core in M0_CORES
