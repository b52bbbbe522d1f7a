"""The float-to-uint8 roundings of seed A's format in a few FPU instructions against their Python
twins: `mt_requant_f32_floor` (a truncating conversion corrected by one compare, integer add and
clamp) equals `fqt_kernels.requant_f32_floor`, every step a float32 operation, over the whole int32
range, at the integers and half-integers where floor and truncation part, at the 2^22 edges of the
fast path and where the product overflows to infinity; `mt_round_clamp_u8` (the uint8 weight
update's clamp(round_half_away(x), -z, 255 - z) + z from trunc(2x)) equals `round_half_away` and
the clamp at every tie, next to them, and beyond its +-512 saturation."""

from __future__ import annotations

import subprocess

import numpy as np
from runtime_probe import build_probe

from conftest import needs_gcc
from mcutrain.engines.fqt_kernels import requant_f32_floor
from mcutrain.quant.rounding import round_half_away

pytestmark = needs_gcc

PROBE_C = r"""
#include <stdio.h>
#include <string.h>
#include "mt_fqt_math.h"
int main(void)
{
    long long a, z, lo, hi;
    unsigned int mbits;
    while (scanf("%lld %u %lld %lld %lld", &a, &mbits, &z, &lo, &hi) == 5) {
        float m;
        memcpy(&m, &mbits, 4);
        if (a == -1 - 2147483647LL - 1) { /* marker: mt_round_clamp_u8(m, z) */
            printf("%d\n", (int)mt_round_clamp_u8(m, (int32_t)z));
            continue;
        }
        printf("%d\n", (int)mt_requant_f32_floor((int32_t)a, m, (int32_t)z, (int32_t)lo, (int32_t)hi));
    }
    return 0;
}
"""


def _cases(rng: np.random.Generator, n: int):
    """n accumulators for each of the multipliers, zero points and clamps in the rows of `m`."""
    acc = rng.integers(-(2**31), 2**31, n, dtype=np.int64)
    acc[:n // 2] = rng.integers(-70000, 70000, n // 2)                       # gradient and conv sums
    acc[n // 2:n // 2 + 8] = [-4096 * 4096 - 1, -4096 * 4096, -4096 * 4096 + 1, 4096 * 4096 - 1,
                              4096 * 4096, 4096 * 4096 + 1, 2**31 - 1, -(2**31)]
    m = np.exp(rng.uniform(np.log(2.0**-20), np.log(2.0**4), 40)).astype(np.float32)
    m[:12] = np.float32(2.0) ** -np.arange(12, dtype=np.float32)          # exact halves and quarters
    m[12] = np.float32(2.0**-12)                                           # 4096^2 * m = 2^22 exactly
    m[13:20] *= -1                                                         # negative multipliers
    m[20] = np.float32(3e38)                                               # products overflow to +-inf
    z = rng.integers(0, 256, len(m))
    lo = np.where(np.arange(len(m)) % 2 == 0, 0, z)                        # none / relu in uint8
    return acc, m, z, lo


def test_fast_float_requantization_equals_the_float32_steps(tmp_path):
    exe = build_probe(tmp_path, PROBE_C, training=True)
    acc, m, z, lo = _cases(np.random.default_rng(19), 2000)
    rows = [(a, mb, zz, lw) for mb, zz, lw in zip(m.view(np.uint32), z, lo) for a in acc]
    lines = "\n".join(f"{a} {mb} {zz} {lw} 255" for a, mb, zz, lw in rows) + "\n"
    out = subprocess.run([str(exe)], input=lines, capture_output=True, text=True, check=True).stdout
    got = np.array(out.split(), dtype=np.int64).reshape(len(m), len(acc))
    for k in range(len(m)):            # one twin call per multiplier, vectorized over the accumulators
        want = requant_f32_floor(acc, np.float32(m[k]), int(z[k]), int(lo[k]), 255)
        np.testing.assert_array_equal(got[k], want, err_msg=f"multiplier {m[k]!r}, zero point {z[k]}")
    assert len(np.unique(got)) == 256        # the cases reach every uint8 value, not only the clamps


ROUND_MARK = -(2**31) - 1


def test_fast_weight_rounding_equals_round_half_away_and_the_clamp(tmp_path):
    exe = build_probe(tmp_path, PROBE_C, training=True)
    rng = np.random.default_rng(23)
    ties = np.arange(-1100, 1101, dtype=np.float32) / np.float32(2)     # every half-integer and integer
    near = np.concatenate([np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))])
    wide = rng.uniform(-3000, 3000, 4000).astype(np.float32)
    x = np.concatenate([ties, near, wide, np.float32([3e38, -3e38, np.inf, -np.inf, 1e-40, -1e-40])])
    z = rng.integers(0, 256, len(x))
    lines = "\n".join(f"{ROUND_MARK} {xb} {zz} 0 0" for xb, zz in zip(x.view(np.uint32), z)) + "\n"
    out = subprocess.run([str(exe)], input=lines, capture_output=True, text=True, check=True).stdout
    got = np.array(out.split(), dtype=np.int64)
    with np.errstate(invalid="ignore"):
        want = np.clip(round_half_away(x).astype(np.float64), -z, 255 - z).astype(np.int64) + z
    np.testing.assert_array_equal(got, want)
