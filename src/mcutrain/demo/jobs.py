"""`mcutrain` command lines run in the background, so the demo's stages overlap.

After pretraining, the two adaptations and the MCU builds need nothing from each other: each
runs as its own process (the very command line the demo prints), and two cores work at once
instead of one. Output goes to temporary files, never to a pipe that could fill while the
demo waits on another job.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO, Any

SINGLE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""BLAS threads per job: the jobs already fill the cores, and idle BLAS threads spin."""


MAIN = "import sys; from mcutrain.cli import main; sys.exit(main(sys.argv[1:]))"
"""The `mcutrain` entry point. NOTE: not `python -m mcutrain.cli`, which would load cli.py twice
(as __main__ and as mcutrain.cli), so its `except UserError` would miss the commands' errors."""


class JobError(RuntimeError):
    """A background command that failed; the message holds its command line and error output."""


@dataclass
class Job:
    """One `mcutrain ARGV...` process started by `start`."""

    argv: list[str]
    proc: subprocess.Popen
    stdout: IO[bytes]
    stderr: IO[bytes]
    started: float = field(default_factory=time.perf_counter)
    seconds: float | None = None
    """Wall time from start to end."""
    cpu_seconds: float | None = None
    """CPU time of the process and everything it ran (compiler, QEMU): what the job costs, whatever
    else the machine is doing."""
    said: bool = False
    """Whether `wait_all` has said that it ended (each job is said once)."""
    _done: tuple[int, str, str] | None = field(default=None, repr=False)

    @property
    def command(self) -> str:
        return "mcutrain " + " ".join(self.argv)

    def wait(self) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) once the process has ended."""
        if self._done is None:
            _, status, usage = os.wait4(self.proc.pid, 0)
            self._finish(status, usage)
        return self._done

    def running(self) -> bool:
        """Whether the process is still working (reaps it, without blocking, once it has ended)."""
        if self._done is not None:
            return False
        pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
        if pid == 0:
            return True
        self._finish(status, usage)
        return False

    def _finish(self, status: int, usage) -> None:
        self.seconds = time.perf_counter() - self.started
        self.cpu_seconds = usage.ru_utime + usage.ru_stime
        code = self.proc.returncode = os.waitstatus_to_exitcode(status)
        self._done = (code, _read(self.stdout), _read(self.stderr))

    def json(self) -> dict[str, Any]:
        """The `--json` result on stdout, whatever the exit code (a mismatch exits 1 with a result)."""
        code, out, err = self.wait()
        try:
            return json.loads(out)
        except json.JSONDecodeError:
            raise JobError(f"'{self.command}' failed: {_why(code, out, err)}") from None


def _why(code: int, out: str, err: str) -> str:
    """The error a failed command printed; of a Python traceback its last line (the exception)
    first, the whole traceback after it."""
    text = err.strip() or out.strip()
    if not text:
        return f"exit code {code}"
    if text.startswith("Traceback"):
        return f"{text.splitlines()[-1]}\n{text}"
    return text


def _read(f: IO[bytes]) -> str:
    f.seek(0)
    text = f.read().decode(errors="replace")
    f.close()
    return text


WAIT_SAYS_EVERY = 15.0
"""Seconds between two "still running" lines while the demo waits for its jobs."""


def wait_all(jobs: dict[str, Job], log, every: float = WAIT_SAYS_EVERY) -> None:
    """Wait for every job, saying each one as it ends and, every `every` seconds, which still run.

    Why: the demo's MCU stage and adaptations take one to two minutes side by side; without
    these lines the demo looks hung. Each job is reaped as soon as it ends, so its `seconds`
    is its own wall time, not the time until the demo got round to it.
    """
    pending = {name: job for name, job in jobs.items() if not job.said}
    started = min((j.started for j in jobs.values()), default=time.perf_counter())
    last = time.perf_counter()
    while pending:
        for name in [n for n, job in pending.items() if not job.running()]:
            job = pending.pop(name)
            job.said = True
            log(f"  {name}: {'done' if job.wait()[0] == 0 else 'failed'} ({job.seconds:.0f} s)")
        if pending and time.perf_counter() - last >= every:
            last = time.perf_counter()
            log(f"  still running: {', '.join(pending)} ({last - started:.0f} s)")
        if pending:
            time.sleep(0.2)


def start(argv: list[str]) -> Job:
    """Start `mcutrain ARGV...` with this Python (the same install) in the background."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    env = {**os.environ, **SINGLE_THREAD_ENV}
    proc = subprocess.Popen([sys.executable, "-c", MAIN, *argv], stdout=out, stderr=err,
                            stdin=subprocess.DEVNULL, env=env)
    return Job(list(argv), proc, out, err)
