"""C source formatting: identifiers and constant arrays, deterministic to the byte.

Generated files are snapshot-tested, so every number is printed the same way on every
machine (plain decimal integers; no floats are ever emitted into code).

Example:
    >>> c_ident("blocks.0.pw1")
    'blocks_0_pw1'
    >>> print(c_array("int8_t", "w", np.array([1, -2, 3], np.int8), per_line=2))
    static const int8_t w[3] = {
        1, -2,
        3,
    };
"""

from __future__ import annotations

import re

import numpy as np

C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float for
goto if inline int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while""".split())


def c_ident(name: str) -> str:
    """A valid C identifier for a tensor or node name (non-alphanumerics become '_')."""
    s = re.sub(r"[^0-9A-Za-z_]", "_", name)
    if not s or s[0].isdigit() or s in C_KEYWORDS:
        s = "t_" + s
    return s


def unique_idents(names: list[str]) -> dict[str, str]:
    """Map names to distinct C identifiers (a numeric suffix resolves collisions)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for n in names:
        base = c_ident(n)
        ident, k = base, 1
        while ident in used:
            k += 1
            ident = f"{base}_{k}"
        used.add(ident)
        out[n] = ident
    return out


def _literal(v: int, ctype: str) -> str:
    # NOTE: -2147483648 is not an int literal in C (it is -(2147483648)); spell it as an expression.
    if ctype == "int32_t" and v == -(2**31):
        return "(-2147483647 - 1)"
    return str(int(v))


def c_array(ctype: str, name: str, values: np.ndarray, per_line: int = 16, comment: str = "") -> str:
    """`static const <ctype> name[N] = {...};` with `per_line` values per line."""
    flat = np.asarray(values).reshape(-1)
    lines = []
    if comment:
        lines.append(f"/* {comment} */")
    lines.append(f"static const {ctype} {name}[{max(len(flat), 1)}] = {{")
    items = [_literal(v, ctype) for v in flat.tolist()] or ["0"]
    for i in range(0, len(items), per_line):
        lines.append("    " + ", ".join(items[i:i + per_line]) + ",")
    lines.append("};")
    return "\n".join(lines)
