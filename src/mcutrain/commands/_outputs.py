"""Output paths checked before a command starts its work (training, building, planning).

Why: a typo in `-o` used to surface only when the result was saved, after minutes of
training. Every command that writes calls `check_output` on each output first; the test
itself is `io.check_writable`.
"""

from __future__ import annotations

from pathlib import Path

from mcutrain.errors import UserError


def check_output(path: str | Path | None, option: str, suffix: str | None = None,
                 directory: bool = False) -> None:
    """UserError naming `option` when `path` (if given) could not be written at the end."""
    if path is None:
        return
    from mcutrain.io import OutputPathError, check_writable
    try:
        check_writable(path, suffix, what=option, directory=directory)
    except OutputPathError as e:
        raise UserError(str(e)) from None
