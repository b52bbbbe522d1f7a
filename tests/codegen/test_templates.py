"""The template loader: fields must match placeholders exactly, every template ships and is used.

What reaches the files is checked by the library snapshots (byte for byte) and by
test_hostile_names (model text escaped by the callers); here the loader's own contract.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from mcutrain.codegen.cformat import c_comment
from mcutrain.codegen.templates import TemplateError, placeholders, render, template_names

ROOT = Path(__file__).resolve().parents[2]
CODEGEN = ROOT / "src" / "mcutrain" / "codegen"
HOSTILE = '*/ #include "evil.h" @name@ $(CC) ${X} {{ }} /*'
"""A field value with the syntax of every language the templates hold, and a placeholder."""


def test_templates_are_shipped_as_package_data():
    tomllib = pytest.importorskip("tomllib")   # Python 3.11+
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    names = template_names()
    assert {"Makefile.in", "CMakeLists.txt.in", "model_inference.c", "state_io.c"} <= set(names)
    unshipped = [n for n in names
                 if not any(fnmatch.fnmatch(f"codegen/templates/{n}", p) for p in patterns["mcutrain"])]
    assert unshipped == []


def test_every_template_is_used_by_the_code_generator():
    code = "".join(p.read_text() for p in CODEGEN.glob("*.py"))
    assert [n for n in template_names() if f'"{n}"' not in code] == []


@pytest.mark.parametrize("name", template_names())
def test_every_template_renders_each_field_verbatim(name):
    fields = placeholders(name)
    text = render(name, **{f: f"<{f}>" for f in fields})
    assert all(f"<{f}>" in text for f in fields)
    assert not any(f"@{f}@" in text for f in fields)


def test_values_are_spliced_as_given_so_callers_escape():
    harness = {"program": "p", "lib": "model"}
    assert HOSTILE in render("Makefile.harness.in", source=HOSTILE, **harness)   # never expanded again
    want = "\t$(CC) $(CFLAGS) s libmodel.a -o 7\n"
    assert render("Makefile.harness.in", source="s", program=7, lib="model") == want
    fields = {f: "0" for f in placeholders("model_inference.h")}
    header = render("model_inference.h", **{**fields, "provenance": c_comment(HOSTILE)})
    assert header.count("*/") == render("model_inference.h", **fields).count("*/")   # the comment holds
    assert "Provenance: *_ #include" in header


def test_render_refuses_fields_that_do_not_match():
    with pytest.raises(TemplateError, match=r"missing fields \['lib', 'program'\]"):
        render("Makefile.harness.in", source="s")
    with pytest.raises(TemplateError, match=r"unknown fields \['extra'\]"):
        render("Makefile.harness.in", source="s", program="p", lib="model", extra="x")
    with pytest.raises(TemplateError, match="must be str, int or float"):
        render("Makefile.harness.in", source=["s"], program="p", lib="model")
    with pytest.raises(TemplateError, match=r"no template 'nope\.c'; known: "):
        render("nope.c")
