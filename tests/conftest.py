"""Fixtures shared by every test folder.

`arm_tools`: tests that build or run Cortex-M code take it (`riscv_tools` for RISC-V code;
`target_tools` picks one of the two from a test's `target` or `core` parameter). Without the
cross toolchain or QEMU they skip with the command that installs them — except in CI as root, where
`make test` installs both: there a missing tool is a broken set-up and fails loudly, so a
green CI can never hide skipped MCU tests.

Modules with a test marked `slow` (half a minute or more on a quiet machine) are collected first:
`make test` hands whole modules to its workers in collection order, so the long ones start at
once instead of leaving one worker busy with one of them after the other has finished.
"""

from __future__ import annotations

import os

from float_pin import pin

pin()       # before anything imports numpy: see tests/float_pin.py

import pytest  # noqa: E402

from mcutrain.mcu.qemu import find_qemu  # noqa: E402
from mcutrain.mcu.toolchain import ToolchainMissingError, find_toolchain  # noqa: E402
from mcutrain.targets import get_target  # noqa: E402

QEMU_OF = {"arm": "qemu-system-arm", "riscv": "qemu-system-riscv32"}


def _cross_tools(arch: str):
    """The cross toolchain of `arch` (QEMU checked too); skips, or fails in CI as root, when missing."""
    try:
        tools = find_toolchain(arch)
        find_qemu(QEMU_OF[arch])
    except ToolchainMissingError as e:
        _skip_unless_ci_root(str(e), f"CI runs as root, so 'make test' should have installed the tools: {e}")
    return tools


def _skip_unless_ci_root(reason: str, failure: str) -> None:
    """Skip with `reason`, except in CI as root, where nothing may go unchecked: fail with `failure`."""
    if os.environ.get("CI") and hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.fail(failure)
    pytest.skip(reason)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules holding a `slow` test first; the order inside a module and among the rest is kept."""
    slow = {getattr(item, "module", None) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: getattr(item, "module", None) not in slow)


@pytest.fixture(scope="session")
def pinned_floats():
    """The float kernels the digests were recorded with (tests/float_pin.py); where this CPU cannot run
    them the test skips, except in CI as root, where a digest must never go unchecked."""
    from float_pin import PINNED_KERNEL, pinned_kernel_in_use
    if not pinned_kernel_in_use():
        msg = (f"the recorded digests are of OpenBLAS's {PINNED_KERNEL} kernels on one thread, which this "
               "machine does not run (tests/float_pin.py)")
        _skip_unless_ci_root(msg, msg)


@pytest.fixture(scope="session")
def arm_tools():
    """The ARM cross toolchain and qemu-system-arm."""
    return _cross_tools("arm")


@pytest.fixture(scope="session")
def riscv_tools():
    """The RISC-V cross toolchain with picolibc and qemu-system-riscv32."""
    return _cross_tools("riscv")


@pytest.fixture
def target_tools(request):
    """The tools of the test's parametrized `target` (or `core`): `arm_tools` or `riscv_tools`."""
    params = request.node.callspec.params
    arch = get_target(params.get("target", params.get("core"))).arch
    return request.getfixturevalue(f"{arch}_tools")
