"""The DSP kernels' prepared requantize (`mt_requantize_fast`, portable emulation on the host)
equals the one requantize `mt_requantize` wherever the kernels use it, and falls outside it
exactly where they fall back (the native SMLAL/SSAT form runs bit-exact in the QEMU tests)."""

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
        const int ok = mt_requant_fast_ok((int32_t)m, (int32_t)s);
        const int32_t sh = -1 - (int32_t)s;
        const int32_t c1 = ok ? mt_requant_c1(sh, (int32_t)z) : 0;
        const int32_t fast = ok ? mt_requantize_fast((int32_t)a, (int32_t)m, sh, c1) : 999;
        printf("%d %d %d\n", ok, (int)fast,
               (int)mt_requantize((int32_t)a, (int32_t)m, (int32_t)s, (int32_t)z, -128, 127));
    }
    return 0;
}
"""


def test_fast_requantize_equals_the_one_requantize(tmp_path):
    exe = build_probe(tmp_path, PROBE_C)
    rng = np.random.default_rng(11)
    n = 20000
    acc = rng.integers(-(2**31), 2**31, n, dtype=np.int64)
    acc[:8] = [-(2**31), 2**31 - 1, 0, 1, -1, 2**30, -(2**30), -12345]
    m = np.exp(rng.uniform(np.log(2.0**-33), np.log(2.0**2), n))
    m[:4] = [2.0**-24, 2.0**-3 * 0.999999, 2.0**-3, 2.0**-24 * 0.999]   # the edges of the fast range
    mult, shift = quantize_multiplier(m)
    zp = rng.integers(-128, 128, n)
    zp[:3] = [-128, 127, 0]
    # halves: acc * M lands exactly on .5 for M = 2^-k and acc = odd * 2^(k-1)
    k = rng.integers(3, 21, 200)
    acc[100:300] = (2 * rng.integers(-500, 500, 200) + 1) * 2 ** (k - 1)
    m[100:300] = 2.0 ** -k.astype(np.float64)
    mult[100:300], shift[100:300] = quantize_multiplier(m[100:300])
    lines = "\n".join(f"{a} {mu} {s} {z}" for a, mu, s, z in zip(acc, mult, shift, zp)) + "\n"
    out = subprocess.run([str(exe)], input=lines, capture_output=True, text=True, check=True).stdout
    got = np.array([list(map(int, ln.split())) for ln in out.splitlines()], dtype=np.int64)
    ok = got[:, 0] == 1
    np.testing.assert_array_equal(ok, (mult != 0) & (shift >= -23) & (shift <= -2))
    assert ok.sum() > n // 3 and (~ok).sum() > 100   # both sides of the range exercised
    np.testing.assert_array_equal(got[ok, 1], got[ok, 2])
    want = requantize_output(acc[ok], mult[ok], shift[ok], zp[ok], -128, 127)
    np.testing.assert_array_equal(got[ok, 1], want)
