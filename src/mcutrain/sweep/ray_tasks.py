"""Cells as tasks on an existing Ray cluster (`mcutrain sweep --ray ADDRESS|auto`).

Ray is optional (`pip install 'mcutrain[ray]'`) and imported only here. Each cell is one task of
one CPU running `cell.run_cell`, the very function local workers run, so its result line is the
same bit for bit; the driver (this process) appends the lines as tasks finish. Every node must run
the same mcutrain version (a task from another version is refused: its results would belong to
another key) and see the same data (`MCUTRAIN_DATA`, model and dataset files at the same paths).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

from mcutrain.errors import UserError
from mcutrain.sweep.cell import CellOutcome, CellRunner, CellTask, run_cell
from mcutrain.version import __version__

INSTALL = "pip install 'mcutrain[ray]'"


def connect(address: str):
    """The `ray` module, connected to the cluster at `address` ('auto': the one this machine runs)."""
    try:
        import ray
    except ImportError:
        raise UserError(f"--ray needs Ray, which is not installed; install it with: {INSTALL}") from None
    check_reachable(address)
    if ray.is_initialized():    # connected by an earlier sweep of this process: perhaps elsewhere
        ray.shutdown()
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    except Exception as e:
        raise UserError(f"cannot reach the Ray cluster at '{address}' ({type(e).__name__}: {e}); start "
                        "one with 'ray start --head' and pass its address (HOST:6379), or drop --ray "
                        "to run on local processes") from None
    return ray


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """Refuse at once a HOST:PORT nobody listens on.

    NOTE: `ray.init` retries an unreachable address for minutes before it gives up; a plain TCP
    connection answers in seconds. 'auto' and `ray://` addresses are left to Ray.
    """
    host, _, port = address.rpartition(":")
    if address == "auto" or "://" in address or not port.isdigit():
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as e:
        raise UserError(f"cannot reach the Ray cluster at '{address}' ({e.strerror or e}); start one with "
                        "'ray start --head' and pass its address (HOST:6379), or drop --ray to run on "
                        "local processes") from None


def run_ray(tasks: list[CellTask], address: str, runner: CellRunner) -> Iterator[CellOutcome]:
    """Outcomes of `tasks` in completion order, each a one-CPU task on the cluster at `address`."""
    if not tasks:
        return
    ray = connect(address)
    remote = ray.remote(num_cpus=1, max_retries=0)(run_cell)
    pending = [remote.remote(t, runner) for t in tasks]
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            outcome: CellOutcome = ray.get(ready[0])
            if outcome.line.get("mcutrain") != __version__:
                raise UserError(f"a Ray node runs mcutrain {outcome.line.get('mcutrain')}, this machine "
                                f"{__version__}; install the same version on every node")
            yield outcome
    finally:
        for ref in pending:     # stopped early (Ctrl-C, a version mismatch): free the cluster
            ray.cancel(ref, force=True)
