"""The C runtime's mode "tflite" (mt_fixedpoint.h) equals `fixedpoint.requantize_tflite` bit for bit:
the reference mt_requantize_tflite and mt_multiply_by_quantized_multiplier on every shift TFLite
allows, and the DSP kernels' prepared forms (mt_requantize_fast_tflite / _floor_tflite wherever
mt_requant_fast_ok_tflite admits a channel, mt_mbqm_fast_tflite of TFLite's ADD; portable
emulation on the host, the native SMMLAR/QADD forms run in the QEMU tests), on adversarial and
random operands."""

from __future__ import annotations

import subprocess

import numpy as np
from runtime_probe import build_probe

from conftest import needs_gcc
from mcutrain.quant.fixedpoint import quantize_multiplier, requantize_tflite

pytestmark = needs_gcc

PROBE_C = r"""
#include <stdio.h>
#include "mt_fixedpoint.h"
int main(void)
{
    long long a, m, s, z;
    while (scanf("%lld %lld %lld %lld", &a, &m, &s, &z) == 4) {
        const int32_t acc = (int32_t)a, mu = (int32_t)m, sh = (int32_t)s, zp = (int32_t)z;
        const int ok = mt_requant_fast_ok_tflite(mu, sh);
        const int32_t m2 = mt_requant_mult_tflite(mu);
        const int32_t c1 = ok ? mt_requant_c1(-sh, zp) : 0;
        const int32_t c1f = ok ? mt_requant_c1(-sh, -128) : 0;
        const int add_ok = mu >= (1 << 30) && sh <= 0 && sh >= -31 && acc > -(1 << 30) && acc < (1 << 30);
        const int32_t half = add_ok ? (int32_t)(((uint32_t)1 << -sh) >> 1) : 0;
        const int32_t add_form = add_ok ? mt_mbqm_fast_tflite(acc, m2, -sh, half, sh < 0 ? -1 : 0) : 0;
        printf("%d %ld %d %d %d %d %d\n", (int)add_form,
               (long)mt_multiply_by_quantized_multiplier(acc, mu, sh),
               (int)mt_requantize_tflite(acc, mu, sh, zp, -128, 127), ok,
               ok ? (int)mt_requantize_fast_tflite(acc, m2, -sh, c1) : 999,
               ok ? (int)mt_requantize_floor_tflite(acc, m2, -sh, c1f) : 999,
               (int)mt_requantize_tflite(acc, mu, sh, -128, -128, 127));
    }
    return 0;
}
"""


def _operands(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """Accumulators, multipliers, shifts, zero points: random, the int32 extremes, exact ties of both
    roundings, and multipliers across TFLite's whole shift range (left shifts included)."""
    acc = rng.integers(-(2**31), 2**31, n, dtype=np.int64)
    acc[:10] = [-(2**31), 2**31 - 1, 0, 1, -1, 2**30, -(2**30), -12345, 2**30 - 1, -(2**30) - 1]
    small = rng.integers(-(2**16), 2**16, n // 4)
    acc[10:10 + n // 4] = small                          # the range real layers produce
    m = np.exp(rng.uniform(np.log(2.0**-33), np.log(2.0**29), n))
    m[:6] = [2.0**-24, 2.0**-23, 0.5, 0.999999, 2.0**-24 * 0.999, 1.5]
    mult, shift = quantize_multiplier(m)
    # ties: M = 2^-k (multiplier 2^30, shift 1 - k) and acc = odd * 2^(k-1) (first rounding exact,
    # second a tie), and acc * M = j + 0.5 - tiny (the first rounding makes it a tie)
    k = rng.integers(2, 22, 400)
    acc[-400:-200] = (2 * rng.integers(-250, 250, 200) + 1) * 2 ** (k[:200] - 1)
    mult[-400:] = 2**30
    shift[-400:] = 1 - k
    acc[-200:] = (2 * rng.integers(-250, 250, 200) + 1) * 2 ** (k[200:] - 1) + rng.choice([-1, 1], 200)
    zp = rng.integers(-128, 128, n)
    zp[:3] = [-128, 127, 0]
    return acc, mult.astype(np.int64), shift.astype(np.int64), zp


def test_tflite_requantize_and_its_prepared_forms_equal_the_golden_rule(tmp_path):
    exe = build_probe(tmp_path, PROBE_C)
    acc, mult, shift, zp = _operands(np.random.default_rng(17), 40000)
    lines = "\n".join(f"{a} {mu} {s} {z}" for a, mu, s, z in zip(acc, mult, shift, zp)) + "\n"
    out = subprocess.run([str(exe)], input=lines, capture_output=True, text=True, check=True).stdout
    add_form = np.array([int(ln.split()[0]) for ln in out.splitlines()], dtype=np.int64)
    got = np.array([list(map(int, ln.split()[1:])) for ln in out.splitlines()], dtype=np.int64)
    want = requantize_tflite(acc, mult, shift)
    add_ok = (mult >= 2**30) & (shift <= 0) & (np.abs(acc) < 2**30)
    assert add_ok.sum() > 5000
    np.testing.assert_array_equal(add_form[add_ok], want[add_ok])   # TFLite ADD's prepared form
    np.testing.assert_array_equal(got[:, 0], want)
    np.testing.assert_array_equal(got[:, 1], np.clip(want + zp, -128, 127))
    ok = got[:, 2] == 1
    np.testing.assert_array_equal(ok, (mult >= 2**30) & (shift >= -23) & (shift <= -1))
    assert ok.sum() > 10000 and (~ok).sum() > 10000 and (shift > 0).sum() > 1000   # every side exercised
    np.testing.assert_array_equal(got[ok, 3], got[ok, 1])
    np.testing.assert_array_equal(got[ok, 4], got[ok, 5])
    np.testing.assert_array_equal(got[ok, 5], np.clip(want[ok] - 128, -128, 127))
