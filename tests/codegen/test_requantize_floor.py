"""`mt_requantize_floor` (SMMLA + ASR + SSAT, no sign correction; portable emulation on the host)
equals the one requantize `mt_requantize` when the output zero point is -128 and the clamp
[-128, 127], the case the DSP kernels use it for (a fused relu after PTQ), including the ties
where rounding half up and half away from zero differ; and it does differ for other zero points
(so the kernels must not use it there). The native form runs bit-exact in the QEMU tests."""

from __future__ import annotations

import subprocess

import numpy as np
from runtime_probe import build_probe

from conftest import needs_gcc
from mcutrain.quant.fixedpoint import quantize_multiplier, requantize_output

pytestmark = needs_gcc

PROBE_C = r"""
#include <stdio.h>
#include "mt_fixedpoint.h"
int main(void)
{
    long long a, m, s, z;
    while (scanf("%lld %lld %lld %lld", &a, &m, &s, &z) == 4) {
        const int32_t sh = -1 - (int32_t)s;
        const int32_t c1 = mt_requant_c1(sh, (int32_t)z);
        printf("%d %d\n", (int)mt_requantize_floor((int32_t)a, (int32_t)m, sh, c1),
               (int)mt_requantize((int32_t)a, (int32_t)m, (int32_t)s, (int32_t)z, -128, 127));
    }
    return 0;
}
"""


def _probe(tmp_path):
    return build_probe(tmp_path, PROBE_C)


def _cases(rng: np.random.Generator, n: int, zp: np.ndarray):
    acc = rng.integers(-(2**31), 2**31, n, dtype=np.int64)
    acc[:8] = [-(2**31), 2**31 - 1, 0, 1, -1, 2**30, -(2**30), -12345]
    m = np.exp(rng.uniform(np.log(2.0**-24), np.log(2.0**-3 * 0.999999), n))   # the fast range
    mult, shift = quantize_multiplier(m)
    # ties: acc * M lands exactly on .5 for M = 2^-k and acc = odd * 2^(k-1), both signs
    k = rng.integers(3, 21, 400)
    acc[100:500] = (2 * rng.integers(-500, 500, 400) + 1) * 2 ** (k - 1)
    acc[100:500] = np.where(np.arange(400) % 2 == 0, -np.abs(acc[100:500]), acc[100:500])
    mult[100:500], shift[100:500] = quantize_multiplier(2.0 ** -k.astype(np.float64))
    small = rng.integers(-3000, 3000, 2000)   # results near zero, where the roundings meet
    acc[1000:3000] = small
    keep = (mult != 0) & (shift >= -23) & (shift <= -2)
    return acc[keep], mult[keep], shift[keep], zp[keep]


def _run(exe, acc, mult, shift, zp) -> np.ndarray:
    lines = "\n".join(f"{a} {mu} {s} {z}" for a, mu, s, z in zip(acc, mult, shift, zp)) + "\n"
    out = subprocess.run([str(exe)], input=lines, capture_output=True, text=True, check=True).stdout
    return np.array([list(map(int, ln.split())) for ln in out.splitlines()], dtype=np.int64)


def test_floor_requantize_equals_the_one_requantize_at_zero_point_minus_128(tmp_path):
    exe = _probe(tmp_path)
    n = 20000
    acc, mult, shift, zp = _cases(np.random.default_rng(5), n, np.full(n, -128))
    got = _run(exe, acc, mult, shift, zp)
    assert len(got) > n // 2
    np.testing.assert_array_equal(got[:, 0], got[:, 1])
    np.testing.assert_array_equal(got[:, 0], requantize_output(acc, mult, shift, zp, -128, 127))


def test_floor_requantize_differs_at_other_zero_points(tmp_path):
    exe = _probe(tmp_path)
    n = 20000
    acc, mult, shift, zp = _cases(np.random.default_rng(6), n, np.full(n, 0))
    got = _run(exe, acc, mult, shift, zp)
    assert (got[:, 0] != got[:, 1]).any()   # negative ties round differently once nothing saturates
