"""A library whose every name starts with one prefix, so two libraries link into one firmware image.

Without a prefix a library defines `model_*` functions, `MODEL_*` macros, the `mt_*` runtime and
`MT_*` macros, in `model.h`, `model.c` and `runtime/mt_*.[ch]`: a second library in the same image
would define them again. With `--prefix kws_` every one of them gets the prefix (`kws_model_predict`,
`KWS_MODEL_INPUT_SIZE`, `kws_mt_linear_fwd_s8`, `KWS_MT_OK`, `kws_model.h`, `runtime/kws_mt_nn.h`),
so any two libraries coexist, in one translation unit too.
NOTE: the runtime is prefixed, not shared. Two libraries of one mcutrain version may still hold
different runtimes: a `tflite` model's `mt_requantize` rounds differently (runtime/mt_config.h),
a `--kernels ref` library defines `MT_KERNELS_REF` for its kernels; one shared copy would give one
of them the other's arithmetic without a word. The price is Flash: the kernels both libraries call
are linked twice (`docs/c-api.md`, "Two models in one image").

What is renamed is exactly the library's own names, found in the files it ships: identifiers
`mt_*`/`MT_*` of its runtime sources, `model_*`/`MODEL_*` of its `model.h` and `model.c`, its
harness programs, and its file names (in `#include` lines and in text). Comments and strings are
renamed with the code they describe (assembly defines functions by name in strings), except the
strings of model.c: they are the model's layer names, which reach the layer hook unchanged.
The rename is applied to the generated text, so with no prefix nothing changes, byte for byte.

Example:
    >>> files = {"model.h": "#define MODEL_H\\nint model_init(void);",
    ...          "runtime/mt_types.h": "typedef int mt_status;"}
    >>> sorted(prefixed_files(files, "kws_"))
    ['kws_model.h', 'runtime/kws_mt_types.h']
    >>> prefixed_files(files, "kws_")["kws_model.h"]
    '#define KWS_MODEL_H\\nint kws_model_init(void);'
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from mcutrain.codegen.cformat import c_prefix

LIBRARY_NAME = "model"
"""The library's base name: `model.h`, `model.c`, `libmodel.a`, the CMake target `model`."""

RUNTIME_NAME = re.compile(r"\b(?:mt|MT)_\w+\b")
API_NAME = re.compile(r"\b(?:model|MODEL)_\w+\b")
"""The identifiers a library defines: its runtime's and its public header's."""

WORD = re.compile(r"\b[A-Za-z_]\w*(?:\.[ch]\b)?")
"""An identifier, or a file name such as `mt_nn.h`."""

C_TOKEN = re.compile(r'(#include\s+)"([^"\n]+)"|(/\*.*?\*/|//[^\n]*)|"(?:[^"\\\n]|\\.)*"'
                     r"|'(?:[^'\\\n]|\\.)*'|" + WORD.pattern, re.S)
"""One left-to-right scan of C: an include line's file name, a comment, a string or character
literal (kept), or a word; so a word inside a literal is never seen and a quote inside a
comment never starts one."""

ESCAPE_OR_WORD = re.compile(r"\\.|\w+(?:\.[ch]\b)?")
"""Inside a string literal, scanned token by token: an escape (`\\tmt_x` is a tab, then `mt_x`,
which `\\b` would not see as a word) or a word.
"""


def library_file(prefix: str, ext: str) -> str:
    """`model.h`, `model.c` or (ext 'a') `libmodel.a` for `prefix`."""
    base = f"{prefix}{LIBRARY_NAME}"
    return f"lib{base}.a" if ext == "a" else f"{base}.{ext}"


def library_names(files: dict[str, str], programs: tuple[str, ...] = ()) -> set[str]:
    """The names `files` (relative path -> text) define: runtime and API identifiers, the harness
    `programs`, and the file names of model.h/model.c and of the runtime."""
    names = set(programs)
    for rel, text in files.items():
        path = PurePosixPath(rel)
        if path.parts[:1] == ("runtime",):
            names |= set(RUNTIME_NAME.findall(text))
            names.add(path.name)
        elif rel in (library_file("", "h"), library_file("", "c")):
            names |= set(API_NAME.findall(text))
    names |= {library_file("", "h"), library_file("", "c")}
    return names


def prefixed_path(rel: str, prefix: str, names: set[str]) -> str:
    """`rel` with its file name prefixed when it is one of the library's files (`names`: model.h,
    model.c, a runtime file), wherever it is (an Arduino layout holds copies in its src/)."""
    path = PurePosixPath(rel)
    return str(path.with_name(prefix + path.name)) if path.name in names else rel


def prefixed_text(text: str, names: set[str], prefix: str, c_source: bool = True,
                  keep_strings: bool = False) -> str:
    """`text` with every word in `names` prefixed (`prefix` for lowercase names, its uppercase for
    the others). In C (`c_source`) words inside string literals are renamed too (assembly names its
    functions in strings; messages name macros), escapes skipped, unless `keep_strings` (model.c:
    its strings are the model's layer names); character literals are kept."""
    upper = prefix.upper()

    def rename(word: str) -> str:
        if word in names:
            return (upper if word[:1].isupper() else prefix) + word
        if word[:1] == "D" and word[1:] in names:      # `-DMT_KERNELS_REF` in a comment
            return "D" + rename(word[1:])
        stem, dot, ext = word.partition(".")
        return rename(stem) + dot + ext if dot else word     # `dims.c`: a field, not a file

    def words(s: str) -> str:
        return WORD.sub(lambda m: rename(m.group(0)), s)

    def in_string(lit: str) -> str:
        return ESCAPE_OR_WORD.sub(lambda m: m.group(0) if m.group(0)[0] == "\\" else rename(m.group(0)), lit)

    def token(m: re.Match) -> str:
        if m.group(1) is not None:
            return f'{m.group(1)}"{rename(m.group(2))}"'
        if m.group(3) is not None:
            return words(m.group(3))
        lit = m.group(0)
        if lit[:1] == "'" or (lit[:1] == '"' and keep_strings):
            return lit
        return in_string(lit) if lit[:1] == '"' else rename(lit)

    return C_TOKEN.sub(token, text) if c_source else words(text)


def prefixed_files(files: dict[str, str], prefix: str, programs: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file of a library with its names and path prefixed; `files` unchanged when prefix is ''."""
    if not prefix:
        return files
    c_prefix(prefix)
    names = library_names(files, programs)
    return {prefixed_path(rel, prefix, names):
            prefixed_text(text, names, prefix, rel.endswith((".c", ".h")),
                          keep_strings=PurePosixPath(rel).name == library_file("", "c"))
            for rel, text in files.items()}
