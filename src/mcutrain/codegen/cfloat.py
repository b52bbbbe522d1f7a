"""Exact float32 literals for generated C: the one way a float reaches `model.c`.

A float constant of a training library (a QAS scale, an EMA rate, a float32 weight) must read
back to the very float32 the golden engine used, on every compiler and machine, so it is written
as a C99 hexadecimal literal. Both the ZO/BP-QAS and the FQT emitters use these, so they live
below both (text from the model still goes through `cformat` only).

Example:
    >>> c_float(0.1)
    '0x1.99999a0000000p-4f'
"""

from __future__ import annotations

import numpy as np

from mcutrain.codegen.cformat import c_comment
from mcutrain.codegen.emit import ExportError


def c_float(v: float) -> str:
    """An exact C99 float literal of a float32 value (hexadecimal, 'f' suffix)."""
    f = float(np.float32(v))
    if not np.isfinite(f):
        raise ExportError(f"cannot emit the non-finite float {f}")
    return f"{f.hex()}f" if f != 0 else ("-0.0f" if np.signbit(f) else "0.0f")


def c_float_array(name: str, values: np.ndarray, comment: str = "", const: bool = True) -> str:
    """`static const float name[N]` of exact float literals; `const=False` for a RAM array.
    `comment` goes through `c_comment`."""
    flat = np.asarray(values, np.float32).reshape(-1)
    lines = [f"/* {c_comment(comment)} */"] if comment else []
    lines.append(f"static {'const ' if const else ''}float {name}[{max(len(flat), 1)}] = {{")
    items = [c_float(v) for v in flat.tolist()] or ["0.0f"]
    for i in range(0, len(items), 6):
        lines.append("    " + ", ".join(items[i:i + 6]) + ",")
    lines.append("};")
    return "\n".join(lines)
