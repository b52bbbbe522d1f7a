"""Dataset specs: one string names a dataset, its corruption and a class subset.

Grammar (whitespace not allowed):
    BASE[-c:CORRUPTION:SEVERITY][[CLASSES]]
    CLASSES = item(,item)*   item = N | N-M
Examples: `fashion-mnist`, `fashion-mnist-c:gaussian_noise:5`, `digits-c:contrast:3`,
`fashion-mnist[0-4]`, `mnist[0,2,5]`, `fashion-mnist-c:fog:3[5-9]`. A subset may
also stand before the corruption (`fashion-mnist[0-4]-c:fog:3`); both mean the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcutrain.data.corruptions import CORRUPTIONS

_SPEC = re.compile(r"^(?P<base>[a-z0-9][a-z0-9-]*?)(?P<sub1>\[[^\]]*\])?"
                   r"(?:-c:(?P<corr>[a-z_]+):(?P<sev>-?\d+))?(?P<sub2>\[[^\]]*\])?$")


class SpecError(ValueError):
    """A dataset spec that does not parse; the message shows the grammar."""


@dataclass(frozen=True)
class DatasetSpec:
    """A parsed dataset spec; `str(spec)` gives its canonical form."""

    base: str
    corruption: str | None = None
    severity: int = 0
    classes: tuple[int, ...] | None = None

    def __str__(self) -> str:
        text = self.base
        if self.corruption:
            text += f"-c:{self.corruption}:{self.severity}"
        if self.classes is not None:
            text += "[" + format_classes(self.classes) + "]"
        return text


def _bad(text: str, why: str) -> SpecError:
    return SpecError(f"bad dataset spec '{text}': {why}. Write NAME, NAME-c:CORRUPTION:SEVERITY "
                     "and/or a class subset such as NAME[0-4] or NAME[0,2,5]")


def parse_classes(body: str, text: str = "") -> tuple[int, ...]:
    """'0-4' -> (0, 1, 2, 3, 4); '5,0,2' -> (0, 2, 5): sorted, no duplicates."""
    out: list[int] = []
    for item in body.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", item.strip())
        if not m:
            raise _bad(text or body, f"class item '{item}' is not N or N-M")
        lo, hi = int(m[1]), int(m[2] if m[2] is not None else m[1])
        if hi < lo:
            raise _bad(text or body, f"class range '{item}' runs backwards")
        out.extend(range(lo, hi + 1))
    if len(set(out)) != len(out):
        raise _bad(text or body, "a class is listed twice")
    return tuple(sorted(out))


def format_classes(classes: tuple[int, ...]) -> str:
    """Inverse of parse_classes, with runs written as ranges: (0, 1, 2, 5) -> '0-2,5'."""
    parts, i = [], 0
    while i < len(classes):
        j = i
        while j + 1 < len(classes) and classes[j + 1] == classes[j] + 1:
            j += 1
        parts.append(str(classes[i]) if i == j else f"{classes[i]}-{classes[j]}")
        i = j + 1
    return ",".join(parts)


def parse_spec(text: str) -> DatasetSpec:
    """Parse a dataset spec (see the module docstring); names are checked, sizes are not."""
    m = _SPEC.match(text.strip()) if isinstance(text, str) else None
    if not m:
        raise _bad(str(text), "it does not match the grammar")
    if m["sub1"] and m["sub2"]:
        raise _bad(text, "give at most one class subset")
    sub = m["sub1"] or m["sub2"]
    classes = parse_classes(sub[1:-1], text) if sub else None
    if m["corr"] is None:
        return DatasetSpec(m["base"], None, 0, classes)
    if m["corr"] not in CORRUPTIONS:
        raise _bad(text, f"unknown corruption '{m['corr']}' (known: {', '.join(CORRUPTIONS)})")
    severity = int(m["sev"])
    if not 1 <= severity <= 5:
        raise _bad(text, f"severity {severity} is outside 1..5")
    return DatasetSpec(m["base"], m["corr"], severity, classes)
