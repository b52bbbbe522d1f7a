"""Shared fixtures for tests that need the ARM cross toolchain and QEMU.

Tests that build or run Cortex-M code take the `arm_tools` fixture (or the `dot_elfs` build);
when the tools are missing they skip with the command that installs them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcutrain.mcu.qemu import find_qemu
from mcutrain.mcu.toolchain import ToolchainMissingError, build, find_toolchain

PROGRAMS = Path(__file__).parent / "programs"
CORES = ("cortex-m0plus", "cortex-m4", "cortex-m7")


@pytest.fixture(scope="session")
def arm_tools():
    """The cross toolchain; skips the test (saying how to install) when it or QEMU is missing."""
    try:
        tools = find_toolchain()
        find_qemu()
    except ToolchainMissingError as e:
        pytest.skip(str(e))
    return tools


@pytest.fixture(scope="session")
def dot_elfs(arm_tools, tmp_path_factory) -> dict[str, Path]:
    """programs/dot.c built once per core."""
    out = tmp_path_factory.mktemp("dot")
    return {core: build([PROGRAMS / "dot.c"], core, out / f"dot-{core}.elf").elf for core in CORES}
