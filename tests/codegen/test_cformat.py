"""C identifiers and constant arrays as the generator prints them."""

from __future__ import annotations

import numpy as np

from mcutrain.codegen.cformat import c_array, c_ident, unique_idents


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
