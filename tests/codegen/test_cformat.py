"""C identifiers, comments, strings and constant arrays as the generator prints them."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mcutrain.codegen.cformat import c_array, c_comment, c_comment_lines, c_ident, c_string, unique_idents

PAYLOAD = '*/\n__attribute__((constructor)) static void p(void){system("touch CANARY");}/*'


def hostile_strings(n: int = 400, seed: int = 0):
    """Random strings over the characters that matter in C comments and strings, plus payloads."""
    alphabet = [*"*/?\\\"'\n\r\t\x00\x0b\x0c\x1b\x7f#aZ09_.- ", "\u00e9", "\u2028", "\ufeff", "\U0001f600"]
    rng = random.Random(seed)
    yield from [PAYLOAD, "*/", "/*", "*//*", "/*/", "??/", "???/", "?" * 7, "\\", "a\\\nb", "",
                "*" * 5 + "/" * 5]
    for _ in range(n):
        yield "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))


def _unsafe_in_comment(text: str) -> list[str]:
    bad = [t for t in ("*/", "/*", "??", "\\") if t in text]
    bad += [repr(ch) for ch in text if not " " <= ch <= "~"]
    return bad


def test_c_comment_never_leaves_anything_unsafe():
    failures = {}
    for text in hostile_strings():
        out = c_comment(text)
        full = f"/* {out} */"      # as the emitters splice it: one opener, one closer, nothing else
        if _unsafe_in_comment(out) or full.count("/*") != 1 or full.count("*/") != 1:
            failures[text] = out
    assert failures == {}


@pytest.mark.parametrize("name", ["blocks.0.pw1", "features.0.Conv", "_x-1", "fc: weight [10, 64] int8",
                                  "node            op    (1, 1, 8)    1,234"])
def test_c_comment_keeps_safe_text_and_names_unchanged(name):
    assert c_comment(name) == name
    assert c_string(name) == f'"{name}"'


def test_c_comment_lines_escapes_each_line_and_keeps_the_lines():
    assert c_comment_lines("a */ b\nc /* d\n") == "a *_ b\nc /_ d"
    assert c_comment_lines(PAYLOAD).count("\n") == 1 and "*/" not in c_comment_lines(PAYLOAD)


def test_c_string_is_one_plain_literal():
    for text in hostile_strings(200, seed=1):
        out = c_string(text)
        body = out[1:-1]
        assert out[0] == out[-1] == '"' and not any(c in body for c in '"\\?'), text
        assert all(" " <= ch <= "~" for ch in body), text


def test_arrays_are_const_unless_asked_and_their_comment_is_escaped():
    v = np.array([1, 2], np.int8)
    assert c_array("int8_t", "w", v).startswith("static const int8_t w[2]")
    assert c_array("int8_t", "w", v, const=False).startswith("static int8_t w[2]")
    text = c_array("int8_t", "w", v, comment=PAYLOAD)
    assert text.count("*/") == 1 and "\n__attribute__" not in text and "system" in text.split("\n")[0]


def test_identifiers():
    assert c_ident("blocks.13.pw2") == "blocks_13_pw2"
    assert c_ident("0conv") == "t_0conv"
    assert c_ident("int") == "t_int"
    assert unique_idents(["a.b", "a_b", "a-b"]) == {"a.b": "a_b", "a_b": "a_b_2", "a-b": "a_b_3"}


def test_arrays_print_int32_min_as_an_expression():
    text = c_array("int32_t", "b", np.array([-(2**31), 2**31 - 1, 0], np.int32), per_line=8)
    assert text == ("static const int32_t b[3] = {\n"
                    "    (-2147483647 - 1), 2147483647, 0,\n"
                    "};")


def test_empty_array_still_compiles():
    assert c_array("int8_t", "e", np.zeros(0, np.int8)) == "static const int8_t e[1] = {\n    0,\n};"
