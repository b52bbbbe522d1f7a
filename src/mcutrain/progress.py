"""Progress of long work on stderr: a bar on a terminal, plain lines in a log, nothing when off.

Why one helper: training showed tqdm's bar only when stderr is a terminal and nothing
otherwise, so a run under `nohup`, CI or `2> log` looked hung for minutes; `mcutrain run`
(about 20 s of builds and emulation) showed nothing at all. `Progress` keeps tqdm where it
belongs (a terminal) and otherwise writes one plain line every `PLAIN_EVERY` seconds, plus one
line per named stage (`stage`), which is what a log file can show.

Example:
    >>> with Progress(total=3, desc="demo", show=False) as p:
    ...     p.stage("building")
    ...     p.update(1, loss=0.5)
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

from tqdm import tqdm

PLAIN_EVERY = 10.0
"""Seconds between two plain progress lines (no terminal): often enough to see it is alive."""


class Progress:
    """Counted steps of one job. `show`: True/False forces it on/off; None: on, as a bar on a
    terminal, as plain lines elsewhere (`plain` forces the plain lines, for tests and logs);
    `every` seconds between plain lines (0: only the `stage` lines)."""

    def __init__(self, total: int, desc: str, unit: str = "step", show: bool | None = None,
                 initial: int = 0, stream: IO[str] | None = None, plain: bool | None = None,
                 every: float = PLAIN_EVERY) -> None:
        self.stream = stream or sys.stderr
        self.total, self.desc, self.unit, self.n, self.every = total, desc, unit, initial, every
        self.on = True if show is None else show
        isatty = getattr(self.stream, "isatty", lambda: False)()
        self.plain = (not isatty) if plain is None else plain
        self.started = self.last = time.perf_counter()
        self.postfix: dict[str, Any] = {}
        self.bar = None
        if self.on and not self.plain:
            self.bar = tqdm(total=total, initial=initial, unit=unit, leave=False, desc=desc, file=self.stream)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def line(self, text: str) -> None:
        """One plain line now (kept clear of a bar on the terminal)."""
        if not self.on:
            return
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def _plain_line(self) -> str:
        done = f"{self.n:,}/{self.total:,} {self.unit}s"
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        post = "".join(f", {k} {v}" for k, v in self.postfix.items())
        return f"{self.desc}: {done}{pct}, {time.perf_counter() - self.started:.0f} s{post}"

    def update(self, n: int = 1, **postfix: Any) -> None:
        """`n` more steps done; `postfix` (e.g. loss=...) is shown beside the count."""
        self.n += n
        self.postfix.update({k: f"{v:.3f}" if isinstance(v, float) else v for k, v in postfix.items()})
        if self.bar is not None:
            self.bar.update(n)
            if postfix:
                self.bar.set_postfix(self.postfix)
        elif self.on and self.every and time.perf_counter() - self.last >= self.every:
            self.last = time.perf_counter()
            self.line(self._plain_line())

    def stage(self, text: str) -> None:
        """A named phase begins (a build, an emulation): the bar's label, or a plain line at once."""
        if self.bar is not None:
            self.bar.set_description(f"{self.desc}: {text}")
        else:
            self.last = time.perf_counter()
            self.line(f"{self.desc}: [{self.n + 1}/{self.total}] {text} "
                      f"({time.perf_counter() - self.started:.0f} s)")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
