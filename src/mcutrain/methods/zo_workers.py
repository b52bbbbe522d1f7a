"""ZO queries across worker processes: the same integers for any number of workers.

A ZO step's queries are independent given the step's state: the weights, the batch and the
position of the xorshift32 stream, which jumps ahead in O(log n) (`XorShift32.advance`, the C
twin's `mt_xorshift32_jump`). So each of P processes takes a contiguous range of every unit's
queries (`split_queries`; the training process itself takes the first), re-runs the base pass
from the batch, jumps over the other ranges' draws and computes only its queries' loss
changes. The training process draws every query's signs itself and sums in query order
(`zo_estimator.QueryShare`): the sums are the in-process ones, bit for bit.

Processes are forked once, when a step first splits, and live as long as the method; each step
sends them its state over a pipe as `.npy` bytes (no pickle), and each worker answers one
message per unit. Every worker runs BLAS on one thread. Splitting pays only when a step's
query work is large against its messages (small-cnn's state is 133 KB: a round trip of 0.8 ms
at best) and the base pass each worker repeats, so a step splits only when its query passes
hold at least `MIN_SPLIT_MACS` multiply-accumulates (`use_split`).

Example:
    >>> split_queries(10, 3)
    ((0, 4), (4, 7), (7, 10))
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Iterator
from multiprocessing import Pipe
from multiprocessing.connection import Connection

import numpy as np

MIN_SPLIT_MACS = 50_000_000
"""Query multiply-accumulates of one step below which it runs in one process. NOTE: measured on
small-cnn: batch 32 with 10 queries (mix: ~680M query MACs, ~45 ms) gains from two processes,
while a step of a few million MACs takes about as long as the messages and the duplicated base
pass."""


def available_cores() -> int:
    """The cores this process may run on (`os.sched_getaffinity`: a container's or taskset's
    limit, not the machine's count), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:        # pragma: no cover - platforms without sched_getaffinity
        return max(1, os.cpu_count() or 1)


def split_queries(n: int, parts: int) -> tuple[tuple[int, int], ...]:
    """`n` queries as at most `parts` contiguous, non-empty ranges of near-equal size, in order."""
    p = max(1, min(parts, n))
    edges = [n * k // p for k in range(p + 1)]
    return tuple((edges[k], edges[k + 1]) for k in range(p))


def use_split(query_macs: int, parts: int) -> bool:
    """The rule: split a step across processes only when its query passes are large enough."""
    return parts > 1 and query_macs >= MIN_SPLIT_MACS


def encode(arrays: Iterable[np.ndarray]) -> bytes:
    """Arrays as concatenated `.npy` records (no pickle: `allow_pickle=False`)."""
    buf = io.BytesIO()
    for a in arrays:
        np.save(buf, np.asarray(a), allow_pickle=False)
    return buf.getvalue()


def decode(data: bytes) -> list[np.ndarray]:
    """The arrays of `encode`, in order."""
    buf = io.BytesIO(data)
    out = []
    while buf.tell() < len(data):
        out.append(np.load(buf, allow_pickle=False))
    return out


StepLosses = Callable[[list[np.ndarray], tuple[int, int]], Iterator[np.ndarray]]
"""A worker's work: from a step's state arrays and its query range, each unit's loss changes."""

_OK, _FAILED = 0, 1


def _serve(conn: Connection, work: StepLosses, part: tuple[int, int]) -> None:
    """A worker's loop: one step's state in, one message per unit out, until the pipe closes."""
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1):
        while True:
            try:
                data = conn.recv_bytes()
            except EOFError:
                return
            if not data:
                return
            try:
                for losses in work(decode(data), part):
                    conn.send_bytes(encode([np.int8(_OK), losses]))
            except Exception as e:      # the training process raises it: never hang it
                conn.send_bytes(encode([np.int8(_FAILED), np.frombuffer(repr(e).encode(), np.uint8)]))


class QueryWorkers:
    """Forked worker processes, one per query range after the first (which the trainer keeps)."""

    def __init__(self, parts: tuple[tuple[int, int], ...], work: StepLosses) -> None:
        self.parts = parts
        self.conns: list[Connection] = []
        self.pids: list[int] = []
        for part in parts[1:]:
            mine, theirs = Pipe()
            pid = os.fork()
            if pid == 0:                                  # the worker: serve, never return
                code = 0
                try:
                    for c in (mine, *self.conns):     # only the trainer holds the other pipes' ends
                        c.close()
                    _serve(theirs, work, part)
                except BaseException:
                    code = 1
                finally:
                    os._exit(code)
            theirs.close()
            self.conns.append(mine)
            self.pids.append(pid)

    def send_step(self, state: list[np.ndarray]) -> None:
        """Start a step on every worker (they work while the trainer computes its own range)."""
        data = encode(state)
        for c in self.conns:
            c.send_bytes(data)

    def losses(self, k: int) -> np.ndarray:
        """Part k's loss changes of the next unit (k >= 1), waiting for them."""
        status, payload = decode(self.conns[k - 1].recv_bytes())
        if int(status) != _OK:
            raise RuntimeError(f"ZO query worker {k} failed: {payload.tobytes().decode()}")
        return payload

    def close(self) -> None:
        """Stop and reap every worker (idempotent)."""
        for c in self.conns:
            try:
                c.send_bytes(b"")
                c.close()
            except OSError:
                pass
        for pid in self.pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self.conns, self.pids = [], []
