"""mt_fqt_topk_{s8,u8,f32} keep exactly the structures of methods.partial (magnitudes and
top_k_mask, ties to the lower index), list them in order and set the others' errors to z_e, on the
host with ASan + UBSan, through the DSP word loops (emulated) and the portable loops (with and
without the lookup table): channel counts that are not multiples of 4, more rows than one 16-bit
lane pass holds, all-tied magnitudes, int8 -128, uint8 zero points 0 and 255, float32 -0.0 and
NaN, and every k from 0 to the channel count (both selection directions). QEMU runs the native
forms in test_fqt_partial_keep.py.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from conftest import needs_gcc
from mcutrain.buildflags import HOST_SANITIZE
from mcutrain.mcu.hostbuild import find_host_cc
from mcutrain.methods.partial import magnitudes, top_k_mask

pytestmark = needs_gcc

PROBE_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mt_fqt.h"
/* stdin: cases "prec rows channels k z" then rows * channels values (float32 as bit patterns);
 * stdout per case: status, kept, the list, the mask, the errors after the call. */
int main(void)
{
    int prec;
    long rows, ch, k, z;
    while (scanf("%d %ld %ld %ld %ld", &prec, &rows, &ch, &k, &z) == 5) {
        const long n = rows * ch;
        int32_t *list = malloc(sizeof(int32_t) * (size_t)ch), kept = -1;
        uint8_t *mask = malloc((size_t)ch), *e8 = malloc((size_t)n + 1);
        float *ef = malloc(sizeof(float) * (size_t)n + 4), *scratch = malloc(sizeof(float) * (size_t)ch);
        long i, v;
        mt_status st;
        for (i = 0; i < n; ++i) {
            if (scanf("%ld", &v) != 1) {
                return 2;
            }
            if (prec == 2) {
                uint32_t b = (uint32_t)v;
                memcpy(&ef[i], &b, 4);
            } else {
                e8[i] = (uint8_t)v;
            }
        }
        const int32_t r = (int32_t)rows, c = (int32_t)ch, kk = (int32_t)k;
        st = prec == 0 ? mt_fqt_topk_s8(r, c, kk, (int8_t *)e8, list, mask, &kept)
           : prec == 1 ? mt_fqt_topk_u8(r, c, kk, (int32_t)z, e8, list, mask, &kept)
                       : mt_fqt_topk_f32(r, c, kk, ef, scratch, list, mask, &kept);
        printf("%d %d\n", (int)st, (int)kept);
        for (i = 0; i < kept; ++i) {
            printf("%d ", (int)list[i]);
        }
        printf("\n");
        for (i = 0; i < ch; ++i) {
            printf("%d ", (int)mask[i]);
        }
        printf("\n");
        for (i = 0; i < n; ++i) {
            uint32_t b;
            memcpy(&b, &ef[i], 4);
            printf("%ld ", prec == 2 ? (long)b : prec == 0 ? (long)(int8_t)e8[i] : (long)e8[i]);
        }
        printf("\n");
        free(list), free(mask), free(e8), free(ef), free(scratch);
    }
    return 0;
}
"""

PREC = {"int8": 0, "uint8": 1, "float32": 2}


@pytest.fixture(scope="module", params=["MT_EMULATE_DSP", "MT_KERNELS_REF"])
def probe(request, tmp_path_factory):
    """The probe built with the runtime: the DSP twin's word loops, or the reference's portable ones."""
    from mcutrain.codegen.runtime_files import runtime_files

    d = tmp_path_factory.mktemp("topk")
    rt = d / "rt"
    rt.mkdir()
    kernels = "dsp" if request.param == "MT_EMULATE_DSP" else "ref"
    for name, text in runtime_files(kernels, training=True).items():
        (rt / name).write_text(text)
    (d / "probe.c").write_text(PROBE_C)
    srcs = [rt / "mt_fqt_topk.c", rt / "mt_fqt_topk_select.c", rt / "mt_fqt_topk_f32.c"]
    subprocess.run([find_host_cc(), "-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", f"-D{request.param}",
                    *HOST_SANITIZE, f"-I{rt}", str(d / "probe.c"), *map(str, srcs), "-o", str(d / "probe")],
                   check=True)
    return d / "probe"


def _cases(rng: np.random.Generator, prec: str) -> list[tuple[np.ndarray, int, int]]:
    """(errors [rows, channels], k, z_e) covering the paths and the ties."""
    shapes = [(1, 1), (3, 5), (7, 8), (2, 13), (300, 4), (257, 11), (600, 3), (40, 64), (1, 70), (0, 6)]
    out = []
    for rows, ch in shapes:
        for k in sorted({0, 1, ch // 3, ch // 2, ch // 2 + 1, ch - 1, ch}):
            z = int(rng.choice([0, 37, 128, 255])) if prec == "uint8" else 0
            if prec == "float32":
                e = (rng.integers(-3, 4, (rows, ch)) * 0.25).astype(np.float32)
                e[rng.random(e.shape) < 0.2] = np.float32(-0.0)
                if ch > 4 and rows:
                    e[0, ch - 2] = np.nan
            elif prec == "int8":
                e = rng.choice(np.array([-128, -127, -2, -1, 0, 1, 2, 127], np.int8), (rows, ch))
            else:
                e = rng.integers(0, 256, (rows, ch)).astype(np.uint8)
            if rng.random() < 0.3:    # every channel tied
                e[:] = e[:, :1]
            out.append((e, k, z))
    return out


def _run(exe, prec: str, cases) -> list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
    lines = []
    for e, k, z in cases:
        vals = e.view(np.uint32) if prec == "float32" else e
        lines.append(f"{PREC[prec]} {e.shape[0]} {e.shape[1]} {k} {z}\n" + " ".join(map(str, vals.ravel())))
    out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=True).stdout.split("\n")
    res = []
    for i in range(len(cases)):
        st, kept = map(int, out[4 * i].split())
        lst, msk, err = (np.array(out[4 * i + j].split(), np.int64) for j in (1, 2, 3))
        res.append((st, kept, lst, msk, err))
    return res


@pytest.mark.parametrize("prec", ["int8", "uint8", "float32"])
def test_topk_keeps_the_simulators_structures(probe, prec):
    cases = _cases(np.random.default_rng(PREC[prec]), prec)
    for (e, k, z), (st, kept, lst, msk, err) in zip(cases, _run(probe, prec, cases)):
        what = f"{prec} {e.shape} k={k} z={z}"
        ec = e.astype(np.int64) - z if prec != "float32" else e
        mag = magnitudes(ec[None]) if len(e) else np.zeros((1, e.shape[1]), ec.dtype)   # no rows: all 0
        mag = np.where(np.isnan(mag), -np.inf, mag) if prec == "float32" else mag   # NaN ranks last
        want = top_k_mask(mag, np.array([k]))[0]
        assert st == 0, what
        np.testing.assert_array_equal(msk, want.astype(np.int64), err_msg=what)
        assert kept == k, what
        np.testing.assert_array_equal(lst, np.flatnonzero(want), err_msg=what)
        fill = np.zeros_like(e) if prec != "uint8" else np.full_like(e, z)
        after = np.where(want[None, :], e, fill)
        got = err.astype(np.uint32).view(np.float32) if prec == "float32" else err
        np.testing.assert_array_equal(got.reshape(e.shape), after, err_msg=what)
