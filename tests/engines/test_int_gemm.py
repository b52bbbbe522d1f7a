"""Exact integer GEMM through float BLAS: the split-K path against int64."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain.engines.int_gemm import exact_matmul_split_k, exact_matmul_wide, split_k_chunk


def test_split_k_chunk_is_the_largest_exact_divisor():
    assert split_k_chunk(25088, 255, 127) == 512        # 518 * 255 * 127 <= 2^24; 512 divides 25088
    assert split_k_chunk(6272, 255, 127) == 448
    assert split_k_chunk(100, 255, 127) == 100          # short enough for one float32 GEMM
    assert split_k_chunk(1031, 255, 127) == 1           # a prime: only chunks of 1


@pytest.mark.parametrize("k", [9, 6272, 1031 * 2])
def test_split_k_matmul_equals_int64_at_full_magnitude(k):
    """Operands at their bounds, so every chunk's partial sum reaches its 2^24 limit."""
    rng = np.random.default_rng(0)
    a = rng.choice(np.array([-255, 255]), (5, k))
    b = rng.choice(np.array([-127, 127]), (k, 3))
    a[0], b[:, 0] = 255, 127                              # one all-positive dot product: the worst case
    got = exact_matmul_split_k(a.astype(np.float32), b.astype(np.int32), 255, 127)
    assert got.dtype == np.float64 and np.array_equal(got, a @ b)
    # a transposed view, as the weight gradient passes its column matrix
    at = np.ascontiguousarray(a.T).astype(np.float32)
    assert np.array_equal(exact_matmul_split_k(at.T, b, 255, 127), a @ b)


@pytest.mark.parametrize("k,a_max", [(7, 2**46), (1000, 2**44), (4099, 2**40)])
def test_wide_matmul_is_exact_past_float64_integers(k, a_max):
    """Sums past 2^53 (where one float64 GEMM rounds) come out exact from the chunked reduction."""
    rng = np.random.default_rng(k)
    b_max = 255
    a = rng.integers(-a_max, a_max + 1, (2, 3, k))
    b = rng.integers(0, b_max + 1, (2, k, 4))
    a[..., 0, :], b[..., :, 0] = a_max, b_max                # one dot product at its full magnitude
    want = [[[sum(int(x) * int(y) for x, y in zip(a[g, i], b[g, :, j])) for j in range(4)]
             for i in range(3)] for g in range(2)]
    bound = k * a_max * b_max
    assert bound > 2**53
    got = exact_matmul_wide(a.astype(np.float64), b.astype(np.float64), bound, a_max, b_max)
    assert got.dtype == np.int64 and got.tolist() == want
    small = exact_matmul_wide(b[0].T.astype(np.float64), b[0].astype(np.float64), 2**40, 255, 255)
    assert small.tolist() == (b[0].T @ b[0]).tolist()        # under 2^53: one GEMM
