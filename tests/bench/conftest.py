"""Fixtures of the benchmark tests: the datasets some quick benchmarks train on.

The ARM toolchain fixture (`arm_tools`) comes from tests/conftest.py.
"""

from __future__ import annotations

import pytest

from mcutrain.data import dataset_status
from mcutrain.data.registry import missing_message


@pytest.fixture(scope="session")
def fashion_mnist() -> None:
    """Skip, saying where the files were looked for and how to get them, when Fashion-MNIST is not
    installed. Only the files' presence decides: a dataset that is there but fails to load is a
    bug, and the test that needs it fails."""
    if not dataset_status("fashion-mnist")["available"]:
        pytest.skip(missing_message("fashion-mnist"))
