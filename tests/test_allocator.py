"""Tests of the training processes' allocator setting."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from mcutrain import allocator

PROBE = """
import resource, sys
import numpy as np
if sys.argv[1] == "keep":
    from mcutrain.allocator import keep_freed_memory
    assert keep_freed_memory()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def step():                              # three 8 MB buffers written, then all freed
    bufs = [np.ones(1 << 20) for _ in range(3)]
    del bufs
for _ in range(3):                       # the heap reaches its peak once
    step()
f0 = faults()
for _ in range(20):
    step()
print(faults() - f0)
"""


def _faults(mode: str) -> int:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True,
                         env=env)
    return int(out.stdout.strip())


def test_keep_freed_memory_is_idempotent():
    assert allocator.keep_freed_memory() is allocator.keep_freed_memory()


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="mallopt is glibc's (Linux with glibc only)")
def test_freed_buffers_are_reused_without_page_faults():
    """Without the setting glibc trims the freed heap every step (about 1,000 faults); with it, reused."""
    plain, kept = _faults("plain"), _faults("keep")
    assert plain > 20 * 500
    assert kept < 200


def test_fit_applies_the_setting(monkeypatch):
    from mcutrain import zoo
    from mcutrain.methods import loop
    from mcutrain.methods.fqt import FQT
    from mcutrain.methods.fqt_state import FQTConfig
    calls = []
    monkeypatch.setattr(loop, "keep_freed_memory", lambda: calls.append(1) or True)
    x = np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)
    y = np.arange(8) % 10
    loop.fit(FQT(zoo.build("digits-cnn"), FQTConfig(), x), x, y, x, y, epochs=1, batch=8, lr=0.01,
             progress=False)
    assert calls == [1]
