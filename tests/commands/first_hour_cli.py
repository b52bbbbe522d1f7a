"""Running `mcutrain` as a user's shell does, for the first-hour tests (issue 18)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mcutrain

RANDOM = ["--arch", "digits-cnn", "--init", "random"]
"""A model without a file: the zoo's digits CNN, He-initialized."""
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(mcutrain.__file__).parents[1]),
                                                    os.environ.get("PYTHONPATH", "")])}
"""A child started in another folder imports this mcutrain, not an installed one."""


def cli(*argv: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`mcutrain ARGV` in a process of its own; no traceback may reach its stderr."""
    r = subprocess.run([sys.executable, "-m", "mcutrain.cli", *argv], capture_output=True, text=True,
                       cwd=cwd, timeout=timeout, env=ENV)
    assert "Traceback" not in r.stderr, r.stderr
    return r
