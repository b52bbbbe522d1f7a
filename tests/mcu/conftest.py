"""Shared fixtures for tests that need the ARM cross toolchain and QEMU.

Tests that build or run Cortex-M code take the `arm_tools` fixture (tests/conftest.py) or the
`dot_elfs` build below.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcutrain.mcu.toolchain import build

PROGRAMS = Path(__file__).parent / "programs"
CORES = ("cortex-m0plus", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")



@pytest.fixture(scope="session")
def dot_elfs(arm_tools, tmp_path_factory) -> dict[str, Path]:
    """programs/dot.c built once per core."""
    out = tmp_path_factory.mktemp("dot")
    return {core: build([PROGRAMS / "dot.c"], core, out / f"dot-{core}.elf").elf for core in CORES}
