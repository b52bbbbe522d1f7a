"""Fixtures shared by every test folder.

`arm_tools`: tests that build or run Cortex-M code take it. Without the ARM cross toolchain
or QEMU they skip with the command that installs them — except in CI as root, where
`make test` installs both: there a missing tool is a broken set-up and fails loudly, so a
green CI can never hide skipped MCU tests.
"""

from __future__ import annotations

import os

import pytest

from mcutrain.mcu.qemu import find_qemu
from mcutrain.mcu.toolchain import ToolchainMissingError, find_toolchain


@pytest.fixture(scope="session")
def arm_tools():
    """The cross toolchain (QEMU checked too); skips, or fails in CI as root, when missing."""
    try:
        tools = find_toolchain()
        find_qemu()
    except ToolchainMissingError as e:
        if os.environ.get("CI") and hasattr(os, "geteuid") and os.geteuid() == 0:
            pytest.fail(f"CI runs as root, so 'make test' should have installed the tools: {e}")
        pytest.skip(str(e))
    return tools
