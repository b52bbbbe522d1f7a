"""`--ray`: the example sweep on a real local Ray head writes the lines a local run writes, bit for bit.

The head is started on 127.0.0.1 with two CPUs, no dashboard and its own temp folder, as its own
process group (`ray start --head --block`), and that group is stopped by its id when the test ends:
`ray stop` would stop every Ray process of the machine, other people's clusters included.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from mcutrain.commands.sweep import example_text
from mcutrain.errors import UserError
from mcutrain.sweep import store
from mcutrain.sweep.engine import run_sweep
from mcutrain.sweep.ray_tasks import check_reachable
from mcutrain.sweep.spec import parse_sweep

RAY_MISSING = "Ray is not installed; install it with: pip install 'mcutrain[ray]'"


def lines_by_key(out) -> dict[str, str]:
    return {json.loads(t)["key"]: t for t in (out / store.RESULTS).read_text().splitlines()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head():
    """The address of a two-CPU Ray head on 127.0.0.1, stopped (its process group) afterwards."""
    ray = pytest.importorskip("ray", reason=RAY_MISSING)
    exe = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
    if exe is None:
        pytest.skip("the 'ray' command is not installed; install it with: pip install 'mcutrain[ray]'")
    port, temp = free_port(), tempfile.mkdtemp(prefix="ray")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
           "RAY_USAGE_STATS_ENABLED": "0"}
    head = subprocess.Popen([exe, "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
                             "--port", str(port), "--num-cpus", "2", "--include-dashboard=false",
                             "--temp-dir", temp, "--disable-usage-stats"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                check_reachable(address, timeout=1.0)
                break
            except UserError:
                if head.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the Ray head did not start (status {head.poll()})")
                time.sleep(0.5)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        try:
            os.killpg(head.pid, signal.SIGKILL)     # any of the head's processes still running
        except ProcessLookupError:
            pass
        shutil.rmtree(temp, ignore_errors=True)


def test_example_sweep_on_ray_writes_the_lines_of_a_local_run(ray_head, tmp_path):
    spec = parse_sweep(example_text(), "example.toml")
    on_ray = run_sweep(spec, tmp_path / "ray", ray=ray_head, progress=False)
    local = run_sweep(spec, tmp_path / "local", workers=2, progress=False)
    assert on_ray["done"] == local["done"] == 8 and on_ray["failed"] == 0
    assert lines_by_key(tmp_path / "ray") == lines_by_key(tmp_path / "local")
    again = run_sweep(spec, tmp_path / "ray", ray=ray_head, progress=False)
    assert (again["skipped"], again["done"]) == (8, 0)


def test_unreachable_cluster_is_a_clear_message(tmp_path):
    pytest.importorskip("ray", reason=RAY_MISSING)
    spec = parse_sweep(example_text(), "example.toml")
    says = r"cannot reach the Ray cluster at '127\.0\.0\.1:\d+'.*ray start --head"
    with pytest.raises(UserError, match=says):
        run_sweep(spec, tmp_path, ray=f"127.0.0.1:{free_port()}", progress=False)


def test_without_ray_installed_the_message_says_how_to_install_it(tmp_path, monkeypatch):
    """What a core install (no `ray` extra) answers to --ray; runs whether Ray is installed or not."""
    monkeypatch.setitem(sys.modules, "ray", None)           # `import ray` raises ImportError
    spec = parse_sweep(example_text(), "example.toml")
    with pytest.raises(UserError, match=r"install it with: pip install 'mcutrain\[ray\]'"):
        run_sweep(spec, tmp_path, ray="auto", progress=False)
