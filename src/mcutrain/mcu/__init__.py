"""Cortex-M side: cross-build, run in QEMU, count instructions exactly, estimate cycles.

Public API:
    build(sources, target, out, ...) -> BuildResult toolchain.py
    run_elf(elf, target, args, ...) -> RunResult    qemu.py
    count_instructions(elf, target, args, ...) -> Profile   profile.py
    estimate_cycles(counts, target, elf) -> CycleEstimate   cycles.py
"""

from mcutrain.mcu.cycles import CycleEstimate, estimate_cycles
from mcutrain.mcu.profile import Counts, Profile, count_instructions
from mcutrain.mcu.qemu import QemuError, QemuTimeoutError, RunResult, run_elf
from mcutrain.mcu.toolchain import (
    BuildError,
    BuildResult,
    LinkOverflowError,
    SectionSizes,
    ToolchainMissingError,
    build,
    find_toolchain,
    startup_dir,
)

__all__ = [
    "BuildError", "BuildResult", "Counts", "CycleEstimate", "LinkOverflowError",
    "Profile", "QemuError", "QemuTimeoutError", "RunResult", "SectionSizes",
    "ToolchainMissingError", "build", "count_instructions", "estimate_cycles",
    "find_toolchain", "run_elf", "startup_dir",
]
