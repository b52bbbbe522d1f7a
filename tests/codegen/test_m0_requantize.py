"""The ARMv6-M twins' requantization (m0/mt_m0.h) equals mt_requantize bit for bit in both rounding
modes, without a 64-bit multiply: its two-product path (|acc| < 2^16), its four-product path and
every branch of the right shift (above, at and below 32), on adversarial and random operands. The
host runs the same C the Cortex-M0+ compiles (no assembly in it)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from conftest import needs_gcc
from mcutrain.buildflags import HOST_SANITIZE
from mcutrain.codegen.runtime_files import runtime_files
from mcutrain.mcu.hostbuild import find_host_cc
from mcutrain.quant.fixedpoint import quantize_multiplier

pytestmark = needs_gcc

PROBE_C = r"""
#include <stdio.h>
#include "mt_m0.h"
#include "mt_fixedpoint.h"
int main(void)
{
    long a, m, s, z, lo, hi;
    while (scanf("%ld %ld %ld %ld %ld %ld", &a, &m, &s, &z, &lo, &hi) == 6) {
        const int32_t acc = (int32_t)a, mu = (int32_t)m, sh = (int32_t)s, zp = (int32_t)z;
        printf("%d %d\n", (int)mt_requantize(acc, mu, sh, zp, (int32_t)lo, (int32_t)hi),
               (int)mt_m0_requantize(acc, mu, sh, zp, (int32_t)lo, (int32_t)hi));
    }
    return 0;
}
"""


def _operands(rng: np.random.Generator, n: int) -> np.ndarray:
    """Rows (acc, multiplier, shift, zero point, act_min, act_max): accumulators of every size
    (the int32 extremes and the 2^16 edge of the two-product path included), multipliers over
    every shift of the rule, zero multipliers, ties of the rounding, and narrow clamps."""
    acc = rng.integers(-(2**31), 2**31, n, dtype=np.int64)
    acc[: n // 2] = rng.integers(-(2**16), 2**16, n // 2)
    acc[:12] = [-(2**31), 2**31 - 1, 0, 1, -1, 2**16, -(2**16), 2**16 - 1, -(2**16) + 1, 2**30, -(2**30),
                12345]
    mult, shift = quantize_multiplier(np.exp(rng.uniform(np.log(2.0**-33), np.log(2.0**29), n)))
    mult[12:40] = 0
    k = rng.integers(2, 33, 600)   # ties: M = 2^-k, acc = odd * 2^(k-1)
    acc[-600:] = (2 * rng.integers(-250, 250, 600) + 1) * 2 ** np.minimum(k - 1, 22)
    mult[-600:], shift[-600:] = 2**30, 1 - k
    zp = rng.integers(-128, 128, n)
    lo = np.full(n, -128)
    hi = np.full(n, 127)
    lo[: n // 8], hi[: n // 8] = zp[: n // 8], np.minimum(zp[: n // 8] + 90, 127)
    return np.stack([acc, mult.astype(np.int64), shift.astype(np.int64), zp, lo, hi], axis=1)


@pytest.mark.parametrize("tflite", [0, 1])
def test_m0_requantize_equals_the_reference_in_both_modes(tmp_path, tflite):
    rt = tmp_path / "rt"
    rt.mkdir()
    for name, text in runtime_files("ref", m0=True).items():
        (rt / name).write_text(text)
    (tmp_path / "probe.c").write_text(PROBE_C)
    exe = tmp_path / "probe"
    subprocess.run([find_host_cc(), "-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", *HOST_SANITIZE,
                    f"-DMT_ROUNDING_TFLITE={tflite}", f"-I{rt}", str(tmp_path / "probe.c"), "-o", str(exe)],
                   check=True)
    ops = _operands(np.random.default_rng(5 + tflite), 40000)
    lines = "\n".join(" ".join(map(str, row)) for row in ops.tolist()) + "\n"
    out = subprocess.run([str(exe)], input=lines, capture_output=True, text=True, check=True).stdout
    got = np.array([ln.split() for ln in out.splitlines()], dtype=np.int64)
    assert len(got) == len(ops)
    assert len(np.unique(got[:, 0])) > 100, "the operands reach many outputs, not only the clamps"
    np.testing.assert_array_equal(got[:, 1], got[:, 0])
