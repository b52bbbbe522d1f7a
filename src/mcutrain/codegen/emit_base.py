"""The C statement shapes every training-step emitter builds on: a kernel call that returns its status.

A kernel of the runtime returns an `mt_status`; the generated step stores it in `st` and
returns at once when it is not `MT_OK`. The ZO/BP-QAS emitters (`emit_train_ops`) and the FQT
emitters (`emit_fqt_*`) write that check the same way, so it lives here, below both.

Example:
    >>> call("mt_f", ["a", "b"])
    ['st = mt_f(a, b);', 'if (st != MT_OK) {', '    return st;', '}']
"""

from __future__ import annotations


def checked(lines: list[str]) -> list[str]:
    """Wrap a `st = f(...);` call so a failing kernel returns its status."""
    return [*lines, "if (st != MT_OK) {", "    return st;", "}"]


def call(fn: str, args: list[str]) -> list[str]:
    """`st = fn(args);` on one line, returning the status when it is not MT_OK."""
    return checked([f"st = {fn}({', '.join(args)});"])
