"""The text of every generated file, read from `codegen/templates/` and filled in by `render`.

Each generated file that is mostly fixed text (model.h/model.c frames, the state save/load
functions, the harness drivers, Makefile, CMakeLists.txt, README.md) is a file in the
`templates/` folder beside this module, shipped as package data, so it reads as the C, Make,
CMake or Markdown it is. Its variable parts are `@name@` placeholders (lowercase letters,
digits and `_`), the convention of autoconf's `Makefile.in` and CMake's `configure_file`.
NOTE: `@` was picked because none of the languages needs it: C braces, Make's `$(VAR)` and
CMake's `${VAR}` stay literal, so a template is byte for byte the text it produces.

Fields are spliced verbatim. The loader cannot know which language a field lands in, so the
callers escape: every piece of model text (names, provenance, graph summaries) reaching a C
template goes through `codegen/cformat.py` (`c_ident`, `c_comment`, `c_comment_lines`,
`c_string`) first. `render` refuses a field the template does not have or a placeholder left
unfilled, so a renamed placeholder cannot silently drop or leave text.

Example:
    >>> text = render("Makefile.harness.in", source="harness/main.c", program="model_harness", lib="model")
    >>> text.split()[-1]
    'model_harness'
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

PLACEHOLDER = re.compile(r"@([a-z_][a-z0-9_]*)@")
"""`@name@`: a field of a template."""


class TemplateError(ValueError):
    """An unknown template, or fields that do not match its placeholders."""


def template_names() -> list[str]:
    """Every template shipped with the package, by file name."""
    folder = resources.files("mcutrain.codegen").joinpath("templates")
    return sorted(f.name for f in folder.iterdir() if f.is_file())


@cache
def template_text(name: str) -> str:
    """The raw text of template `name` (cached: templates are package data and never change)."""
    if name not in template_names():
        raise TemplateError(f"no template {name!r}; known: {', '.join(template_names())}")
    folder = resources.files("mcutrain.codegen").joinpath("templates")
    return folder.joinpath(name).read_text(encoding="utf-8")


def placeholders(name: str) -> set[str]:
    """The field names template `name` expects."""
    return set(PLACEHOLDER.findall(template_text(name)))


def render(name: str, /, **fields: str | int | float) -> str:
    """Template `name` with each `@field@` replaced by str(value); every field exactly once named.

    Values are spliced as they are: callers pass C text already escaped (see the module doc).
    Refuses unknown and missing fields, and values that are not str, int or float. `name` is
    positional-only, so a template may have a field called `name` (the READMEs do).
    """
    expected = placeholders(name)
    missing, unknown = expected - set(fields), set(fields) - expected
    if missing or unknown:
        raise TemplateError(f"template {name!r}: missing fields {sorted(missing)}, unknown fields "
                            f"{sorted(unknown)}; it has {sorted(expected)}")
    bad = {k: type(v).__name__ for k, v in fields.items() if not isinstance(v, str | int | float)}
    if bad:
        raise TemplateError(f"template {name!r}: fields must be str, int or float, got {bad}")
    return PLACEHOLDER.sub(lambda m: str(fields[m.group(1)]), template_text(name))
