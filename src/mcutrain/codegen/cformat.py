"""C source formatting: identifiers, comments, strings and constant arrays, to the byte.

This module is the one gate for text that reaches generated C: every node or tensor name,
graph name, provenance line or anything else that comes from a model file goes through
`c_ident` (identifiers), `c_comment` (text inside a `/* */` comment) or `c_string` (a string
literal) before an emitter splices it in. Names are already restricted by the graph
(`graph.NAME_RULE`); these functions hold even for text that is not, so a model file can
never end a comment, start a preprocessor line or add code. No model data reaches the
Makefile or CMakeLists.txt (their variable parts are the kernel choice, a fixed word, and the
symbol prefix, which `c_prefix` checks).

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


_COMMENT_SAFE = re.compile(r"[^ -~]|[\\]")
"""Characters never left in a comment: anything but printable ASCII, and the backslash
(a line splice, which could pull the next line into a `//` comment)."""


def c_comment(text: str) -> str:
    """`text` made safe inside a one-line `/* ... */` comment; safe text is returned unchanged.

    Why each rule: `*/` would end the comment and `/*` nests (a -Wcomment error); a newline
    or CR would let the text run onto lines outside the comment's intent; other control and
    non-ASCII characters make the file depend on the reader's encoding; a backslash splices
    lines; `??` starts a trigraph (`??/` is a backslash under -trigraphs). Offending
    characters are replaced visibly with '_' (`*/` becomes `*_`, `/*` becomes `/_`).
    """
    s = _COMMENT_SAFE.sub("_", str(text))
    while "*/" in s or "/*" in s or "??" in s:
        s = s.replace("*/", "*_").replace("/*", "/_").replace("??", "?_")
    return s


def c_comment_lines(text: str) -> str:
    """Multi-line `text` (a graph summary) for the inside of a block comment: each line
    through `c_comment`, joined by newlines."""
    return "\n".join(c_comment(line) for line in str(text).splitlines())


def c_string(text: str) -> str:
    """A C string literal holding `text` (quotes included): printable ASCII kept, except `"`,
    `\\` and `?`, which with everything else become '_' (no escapes, no trigraphs)."""
    return '"' + re.sub(r'[^ -~]|["\\?]', "_", str(text)) + '"'


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


PREFIX_RULE = re.compile(r"[a-z][a-z0-9_]{0,22}_")
"""A symbol prefix (`export --prefix`): a lowercase letter, then letters, digits or `_`, ending in
`_`, at most 24 characters. Lowercase so its uppercase form prefixes the macros; no leading `_`
(reserved names in C); the closing `_` keeps `kws_model_predict` readable."""


def c_prefix(prefix: str) -> str:
    """`prefix` checked against `PREFIX_RULE` and returned unchanged; ValueError saying the rule.

    Unlike `c_ident`, which repairs a model's names, a prefix is typed by the user and is refused,
    never rewritten: the names a firmware calls must be the ones asked for.
    """
    if not isinstance(prefix, str) or not PREFIX_RULE.fullmatch(prefix):
        raise ValueError(f"symbol prefix {prefix!r} is not a C identifier prefix: use a lowercase letter, "
                         "then lowercase letters, digits or '_', ending in '_', at most 24 characters "
                         "(e.g. kws_)")
    return prefix


def _literal(v: int, ctype: str) -> str:
    # NOTE: -2147483648 is not an int literal in C (it is -(2147483648)); spell it as an expression.
    if ctype == "int32_t" and v == -(2**31):
        return "(-2147483647 - 1)"
    return str(int(v))


def c_array(ctype: str, name: str, values: np.ndarray, per_line: int = 16, comment: str = "",
            const: bool = True) -> str:
    """`static const <ctype> name[N] = {...};` with `per_line` values per line.

    `const=False` drops the qualifier (a RAM array the step writes), so no caller ever has to
    rewrite the emitted text. `comment` goes through `c_comment`.
    """
    flat = np.asarray(values).reshape(-1)
    lines = []
    if comment:
        lines.append(f"/* {c_comment(comment)} */")
    qual = "const " if const else ""
    lines.append(f"static {qual}{ctype} {name}[{max(len(flat), 1)}] = {{")
    items = [_literal(v, ctype) for v in flat.tolist()] or ["0"]
    for i in range(0, len(items), per_line):
        lines.append("    " + ", ".join(items[i:i + per_line]) + ",")
    lines.append("};")
    return "\n".join(lines)
