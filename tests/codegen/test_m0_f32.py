"""The ARMv6-M twins' float32 arithmetic (m0/mt_m0_f32.h) equals IEEE float32 bit for bit: the
product of a float32 and a small integer then the add (mt_m0_f32_run, both rounded to nearest
even), the add of two sums (mt_m0_f32_add) and the product of two float32 (mt_m0_f32_mul_fast), on
millions of random and adversarial operands (ties of both roundings, carries out of the
significand, exact and near cancellation, zeros, subnormals, infinities, NaNs, overflow and
underflow), against the host's float32 operations; and the BP-QAS kernels built from them
(conv/linear input error and weight gradient rows, the QAS update in both rounding modes) equal
their reference kernels on tensors that are mostly 0.0, as behind ReLU and max pool. The host runs
the same C the Cortex-M0+ compiles. NaN results compare as NaN: which NaN an operation with two NaN
operands returns is not fixed by C (a compiler may swap the operands of +)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import needs_gcc
from mcutrain.buildflags import HOST_SANITIZE
from mcutrain.codegen.runtime_files import RUNTIME_DIR, runtime_files
from mcutrain.mcu.hostbuild import find_host_cc

pytestmark = needs_gcc

COMMON_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static uint32_t s;
static uint32_t rnd(void) { s ^= s << 13; s ^= s >> 17; s ^= s << 5; return s; }
static uint32_t below(uint32_t n) { return rnd() % n; }
/* float32 bits of every class, most of them normal over a wide range */
static uint32_t operand(void)
{
    const uint32_t u = rnd(), sign = u & 0x80000000u, frac = rnd() & 0x7FFFFFu;
    switch (below(16)) {
    case 0: return sign | (frac >> below(24));                                /* subnormal, zero */
    case 1: return sign | 0x7F800000u | (below(3) == 0 ? 0u : frac);          /* inf, NaN */
    case 2: return sign | ((1u + below(8)) << 23) | frac;                      /* near subnormal */
    case 3: return sign | ((240u + below(15)) << 23) | frac;                   /* near overflow */
    case 4: return sign | ((100u + below(50)) << 23) | ((below(2) ? 0x7FFFFFu : 0u) ^ below(16));
    case 5: return sign | ((100u + below(50)) << 23) | (frac & ~((1u << below(23)) - 1u)); /* ties */
    case 6: return 0u;
    default: return sign | ((90u + below(70)) << 23) | frac;
    }
}
static float f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static int same(uint32_t a, uint32_t b) { return a == b || ((a << 1) > 0xFF000000u && (b << 1) > 0xFF000000u); }
"""

OPS_C = COMMON_C + r"""
#include "mt_m0_f32.h"
int main(int argc, char **argv)
{
    const long n = atol(argv[1]);
    long i, terms = 0, fast = 0, bad = 0, adds = 0, prods = 0, pfast = 0;
    s = (uint32_t)atol(argv[2]);
    for (i = 0; i < n; ++i) {
        /* one sum from +0.0: term by term (runs of one) and in one run, against float32 */
        enum { L = 48 };
        uint32_t e[L];
        int8_t x[L];
        const int32_t zx = (int32_t)below(256) - 128;
        const uint32_t base = operand();
        const int len = 1 + (int)below(L);
        float ref = 0.0f;
        mt_m0_f32 a = {0u, MT_M0_F32_ZERO, 0u}, whole = {0u, MT_M0_F32_ZERO, 0u};
        int k;
        for (k = 0; k < len; ++k) {
            float ek;
            mt_m0_f32 probe = a;
            e[k] = below(3) == 0 ? operand() : base ^ (rnd() & (below(2) ? 0xFFu : 0x807FFFFFu));
            x[k] = (int8_t)(below(4) == 0 ? zx : (int32_t)below(256) - 128);
            if (below(4) == 0) { /* the exact negative of the sum so far: cancellation to +0.0 */
                const uint32_t neg = bits(ref) ^ 0x80000000u;
                if (((neg << 1) >> 24) - 1u < 254u && zx < 127) {
                    e[k] = neg;
                    x[k] = (int8_t)(zx + 1);
                }
            }
            memcpy(&ek, &e[k], 4);
            ref = ref + (float)(x[k] - zx) * ek;
            if ((e[k] << 1) != 0u && x[k] != zx && a.e != MT_M0_F32_PACKED) {
                fast += !mt_m0_f32_mac_fast(&probe, e[k], x[k] - zx);
            }
            mt_m0_f32_run(&a, &ek, 1, &x[k], 1, zx, 1);
            ++terms;
            if (!same(mt_m0_f32_pack(&a), bits(ref))) {
                if (bad++ < 5) printf("mac %08x * %d: %08x, float32 %08x\n", e[k], x[k] - zx, mt_m0_f32_pack(&a), bits(ref));
                break;
            }
        }
        if (k == len) {
            mt_m0_f32_run(&whole, (const float *)(const void *)e, 1, x, 1, zx, len);
            if (!same(mt_m0_f32_pack(&whole), bits(ref)) && bad++ < 5) printf("run of %d: %08x, float32 %08x\n", len, mt_m0_f32_pack(&whole), bits(ref));
        }
        { /* the add of two sums */
            uint32_t p = operand(), q = below(2) ? operand() : (p ^ 0x80000000u) + below(5) - 2u;
            mt_m0_f32 ap, aq;
            if (p == 0x80000000u) p = 0u; /* a sum is never -0.0 */
            mt_m0_f32_unpack(&ap, p);
            mt_m0_f32_unpack(&aq, q);
            mt_m0_f32_add(&ap, &aq);
            ++adds;
            if (!same(mt_m0_f32_pack(&ap), bits(f32(p) + f32(q))) && bad++ < 5) printf("add %08x + %08x: %08x, float32 %08x\n", p, q, mt_m0_f32_pack(&ap), bits(f32(p) + f32(q)));
        }
        { /* the product of two float32 */
            uint32_t p = operand(), q = operand();
            mt_m0_f32 o;
            if (below(4) == 0) q = (q & 0xFF800000u) | (1u << below(23)) | (1u << below(23));
            ++prods;
            if (!mt_m0_f32_mul_fast(&o, p, q)) {
                ++pfast;
                if (!same(mt_m0_f32_pack(&o), bits(f32(p) * f32(q))) && bad++ < 5) printf("mul %08x * %08x: %08x, float32 %08x\n", p, q, mt_m0_f32_pack(&o), bits(f32(p) * f32(q)));
            }
        }
    }
    printf("terms %ld fast %ld adds %ld products %ld fast %ld bad %ld\n", terms, fast, adds, prods, pfast, bad);
    return 0;
}
"""

KERNELS = ("mt_conv2d_bwd_w_row_s8_f32", "mt_conv2d_bwd_in_s8_f32", "mt_linear_bwd_in_s8_f32",
           "mt_linear_bwd_w_row_s8_f32", "mt_qas_upd_s8_f32")
"""The m0/ twins built on mt_m0_f32.h, each compared with its reference kernel."""

KERNELS_C = COMMON_C + r"""
#include "mt_train.h"
mt_status m0_conv2d_bwd_w_row_s8_f32(const mt_conv_params *, const mt_dims *, const int8_t *, const mt_dims *,
                                     const float *, const mt_dims *, int32_t, float *);
mt_status m0_conv2d_bwd_in_s8_f32(const mt_conv_params *, const mt_dims *, const float *, const mt_dims *,
                                  const int8_t *, const mt_dims *, float *);
mt_status m0_linear_bwd_in_s8_f32(int32_t, int32_t, const float *, const int8_t *, int32_t, float *);
mt_status m0_linear_bwd_w_row_s8_f32(int32_t, int32_t, const int8_t *, int32_t, const float *, int32_t, int32_t,
                                     float *);
mt_status m0_qas_upd_s8_f32(int32_t, int32_t, const float *, const float *, uint32_t *, int8_t *);
static long compared, bad;
static void check(const char *what, const float *a, const float *b, long n)
{
    long i;
    for (i = 0; i < n; ++i, ++compared) {
        if (!same(bits(a[i]), bits(b[i]))) {
            if (bad++ < 5) printf("%s[%ld]: twin %08x, reference %08x\n", what, i, bits(b[i]), bits(a[i]));
            return;
        }
    }
}
/* an error tensor: mostly 0.0, else normal over a narrow range, now and then any class */
static void errors(float *e, long n)
{
    long i;
    for (i = 0; i < n; ++i) {
        const uint32_t u = below(10) < 7 ? 0u : below(50) == 0 ? operand() : (rnd() & 0x807FFFFFu) | ((110u + below(12)) << 23);
        e[i] = f32(u);
    }
}
int main(int argc, char **argv)
{
    enum { MAXE = 4096 };
    static float e[MAXE], g1[MAXE], g2[MAXE], k[64];
    static int8_t in[MAXE], w[MAXE], w1[MAXE], w2[MAXE];
    const long n = argc > 1 ? atol(argv[1]) : 1;
    long it;
    s = (uint32_t)atol(argv[2]);
    for (it = 0; it < n; ++it) {
        const int32_t groups = below(4) == 0 ? 2 : 1, cg = 1 + (int32_t)below(4), og = 1 + (int32_t)below(4);
        const int32_t kh = 1 + (int32_t)below(3), kw = 1 + (int32_t)below(3), sh = 1 + (int32_t)below(2), sw = 1 + (int32_t)below(2);
        const int32_t ph = (int32_t)below((uint32_t)kh), pw = (int32_t)below((uint32_t)kw), nb = 1 + (int32_t)below(2);
        const int32_t h = kh + (int32_t)below(6), wd = kw + (int32_t)below(6);
        const int32_t ho = (h + 2 * ph - kh) / sh + 1, wo = (wd + 2 * pw - kw) / sw + 1, zx = (int32_t)below(256) - 128;
        const mt_conv_params p = {zx, 0, sh, sw, ph, pw, groups, -128, 127};
        const mt_dims id = {nb, h, wd, cg * groups}, fd = {og * groups, kh, kw, cg}, od = {nb, ho, wo, og * groups};
        const long ni = (long)nb * h * wd * cg * groups, no = (long)nb * ho * wo * og * groups, nf = (long)og * groups * kh * kw * cg;
        int32_t c, i;
        if (ni > MAXE || no > MAXE || nf > MAXE) continue;
        errors(e, no);
        for (i = 0; i < ni; ++i) in[i] = (int8_t)(below(3) == 0 ? zx : (int32_t)below(256) - 128);
        for (i = 0; i < nf; ++i) w[i] = (int8_t)(below(6) == 0 ? 0 : (int32_t)below(255) - 127);
        for (c = 0; c < og * groups; ++c) {
            mt_conv2d_bwd_w_row_s8_f32(&p, &id, in, &od, e, &fd, c, g1);
            m0_conv2d_bwd_w_row_s8_f32(&p, &id, in, &od, e, &fd, c, g2);
            check("conv2d_bwd_w_row", g1, g2, (long)kh * kw * cg);
        }
        mt_conv2d_bwd_in_s8_f32(&p, &od, e, &fd, w, &id, g1);
        m0_conv2d_bwd_in_s8_f32(&p, &od, e, &fd, w, &id, g2);
        check("conv2d_bwd_in", g1, g2, ni);
        { /* linear: batch nb, out_features o, in_features f */
            const int32_t o = 1 + (int32_t)below(40), f = 1 + (int32_t)below(60);
            errors(e, (long)nb * o);
            mt_linear_bwd_in_s8_f32(nb, o, e, w, f, g1);
            m0_linear_bwd_in_s8_f32(nb, o, e, w, f, g2);
            check("linear_bwd_in", g1, g2, (long)nb * f);
            for (c = 0; c < o; c += 1 + (int32_t)below(5)) {
                mt_linear_bwd_w_row_s8_f32(zx, nb, in, f, e, o, c, g1);
                m0_linear_bwd_w_row_s8_f32(zx, nb, in, f, e, o, c, g2);
                check("linear_bwd_w_row", g1, g2, f);
            }
        }
        { /* QAS update: gradients of every size; steps at ties (nearest) and sums g * k + r that are
             exact integers (stochastic: g * k = -j - r for the draw r that weight gets), both modes */
            const int32_t ch = 1 + (int32_t)below(8), per = 1 + (int32_t)below(200);
            const uint32_t seed = rnd() | 1u;
            uint32_t ahead = seed;
            for (c = 0; c < ch; ++c) {
                k[c] = below(8) == 0 ? f32(operand()) : f32(((120u + below(16)) << 23) | (below(2) ? 0u : rnd() & 0x7FFFFFu));
            }
            for (i = 0; i < ch * per; ++i) {
                const float r = (float)(int32_t)(mt_xorshift32_next(&ahead) >> 8) * (1.0f / 16777216.0f);
                const float kc = k[i / per];
                switch (below(6)) {
                case 0: g1[i] = 0.0f; break;
                case 1: g1[i] = f32(operand()); break;
                case 2: g1[i] = ((float)((int32_t)below(600) - 300) + 0.5f) / kc; break;
                case 3: g1[i] = (-(float)below(300) - r) / kc; break;
                default: g1[i] = (float)((int32_t)below(4001) - 2000) / (float)(1 + below(64)) / kc;
                }
                w1[i] = w2[i] = (int8_t)((int32_t)below(256) - 128);
            }
            {
                uint32_t r1 = seed, r2 = seed;
                mt_qas_upd_s8_f32(ch, per, g1, k, &r1, w1);
                m0_qas_upd_s8_f32(ch, per, g1, k, &r2, w2);
                compared += ch * per;
                if ((memcmp(w1, w2, (size_t)(ch * per)) || r1 != r2) && bad++ < 5) printf("qas_upd stochastic differs\n");
                memcpy(w2, w1, (size_t)(ch * per));
                mt_qas_upd_s8_f32(ch, per, g1, k, NULL, w1);
                m0_qas_upd_s8_f32(ch, per, g1, k, NULL, w2);
                compared += ch * per;
                if (memcmp(w1, w2, (size_t)(ch * per)) && bad++ < 5) printf("qas_upd nearest differs\n");
            }
        }
    }
    printf("compared %ld bad %ld\n", compared, bad);
    return 0;
}
"""


def _runtime(tmp_path: Path) -> Path:
    rt = tmp_path / "rt"
    rt.mkdir()
    for name, text in runtime_files("ref", training=True).items():
        (rt / name).write_text(text)
    return rt


def _run(exe: Path, n: int, seed: int) -> dict[str, int]:
    out = subprocess.run([str(exe), str(n), str(seed)], capture_output=True, text=True, check=True).stdout
    *lines, last = out.splitlines()
    words = last.split()
    counts: dict[str, int] = {}
    for key, val in zip(words[::2], words[1::2]):
        counts[key if key not in counts else key + "2"] = int(val)
    counts["lines"] = len(lines)
    return counts


def test_the_float32_operations_equal_ieee_float32(tmp_path):
    (tmp_path / "ops.c").write_text(OPS_C)
    exe = tmp_path / "ops"
    subprocess.run([find_host_cc(), "-std=c99", "-O2", "-ffp-contract=off", f"-I{RUNTIME_DIR / 'm0'}",
                    f"-I{RUNTIME_DIR / 'include'}", str(tmp_path / "ops.c"), "-o", str(exe)], check=True)
    r = _run(exe, 60000, 11)      # about 1.5 million terms, 60000 adds and products
    assert r["bad"] == 0 and r["lines"] == 0
    assert r["terms"] > 1_000_000 and r["fast"] > r["terms"] // 3, "most terms take the integer path"
    assert r["fast2"] > r["products"] // 3, "most products take the integer path"


def test_the_m0_bp_qas_kernels_equal_the_reference_kernels(tmp_path):
    rt = _runtime(tmp_path)
    cc, flags = find_host_cc(), ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-ffp-contract=off",
                                 *HOST_SANITIZE, f"-I{rt}", f"-I{RUNTIME_DIR / 'm0'}"]
    objs = []
    for name in KERNELS:
        obj = tmp_path / f"{name}_m0.o"
        subprocess.run([cc, *flags, f"-D{name}=m0{name[2:]}", "-c", str(RUNTIME_DIR / "m0" / f"{name}.c"),
                        "-o", str(obj)], check=True)
        objs.append(str(obj))
    (tmp_path / "k.c").write_text(KERNELS_C)
    exe = tmp_path / "k"
    sources = [str(rt / n) for n in (*[f"{k}.c" for k in KERNELS], "mt_xorshift32.c")]
    subprocess.run([cc, *flags, str(tmp_path / "k.c"), *sources, *objs, "-o", str(exe)], check=True)
    r = _run(exe, 300, 1)
    assert r["bad"] == 0 and r["lines"] == 0
    assert r["compared"] > 100_000
