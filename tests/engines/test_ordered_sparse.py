"""`ordered_sparse_rows` against the plain C loop over each row's nonzero terms, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain.engines import ordered_sparse
from mcutrain.engines.ordered_sparse import ordered_sparse_rows


def c_loop(coef, table, base):
    """for r: s = 0.0f; for j ascending: if (c[r][j] != 0) s += c[r][j] * t[base[r] + j] (no FMA)."""
    out = np.zeros((coef.shape[0], table.shape[1]), np.float32)
    for r in range(coef.shape[0]):
        for j in range(coef.shape[1]):
            if coef[r, j] != 0:
                out[r] = out[r] + np.float32(coef[r, j]) * table[base[r] + j]
    return out


@pytest.mark.parametrize("block", [None, 5])
def test_rows_equal_the_c_loop(block, monkeypatch):
    if block is not None:
        monkeypatch.setattr(ordered_sparse, "ROW_BLOCK_FLOATS", block)
    rng = np.random.default_rng(3)
    rows, width, k = 40, 9, 6
    coef = rng.standard_normal((rows, width)) * 10.0 ** rng.integers(-3, 4, (rows, width))
    coef = coef.astype(np.float32)
    coef[rng.random((rows, width)) < 0.7] = 0
    coef[0] = 0                                          # a row with no term at all
    coef[1] = -0.0
    table = (rng.standard_normal((width + rows, k)) * 10.0 ** rng.integers(-3, 4, (width + rows, k)))
    table = table.astype(np.float32)
    base = rng.integers(0, rows, rows)
    got = ordered_sparse_rows(coef, table, base)
    want = c_loop(coef, table, base)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    rev = c_loop(coef[:, ::-1], table[::-1], len(table) - width - base)    # the same terms, reversed
    assert not np.array_equal(rev.view(np.uint32), want.view(np.uint32))
