"""The methods `mcutrain train` offers: `register_method` adds one, `METHODS` holds them all.

Each method's options module (`commands/_<name>_options.py`) registers itself here when
`train.load_method_options` imports it. The registry sits below both, so an options module
never imports the command that loads it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mcutrain.graph import Graph
from mcutrain.methods.base import TrainingMethod


@dataclass(frozen=True)
class MethodEntry:
    """How `train` offers one method: its options and how to build it."""

    add_arguments: Callable[[argparse._ArgumentGroup], None]
    build: Callable[[argparse.Namespace, Graph, np.ndarray], TrainingMethod]
    summary: Callable[[argparse.Namespace], dict[str, Any]]
    """The method's settings for the `--json` result (precision, ...)."""


METHODS: dict[str, MethodEntry] = {}


def register_method(name: str, entry: MethodEntry) -> None:
    """Make `--method name` available (called at import by each method's train hook)."""
    METHODS[name] = entry
