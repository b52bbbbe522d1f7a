/*
 * mcutrain runtime: float32 sums of BP-QAS without an FPU, for the ARMv6-M twins in m0/ (not part
 * of the API).
 *
 * Why: BP-QAS back-propagates float32 errors (docs/integer-semantics.md 12.6). Its inner step is
 * always `acc = acc + (float)v * e` with v a small integer (an int8 weight or x - z_x, |v| <= 255),
 * each product rounded to float32, then the sum rounded. Without an FPU each is three libgcc calls
 * (__aeabi_i2f, __aeabi_fmul, __aeabi_fadd, about 140 instructions). Here the same two IEEE
 * roundings (to nearest, ties to even) are done in integers specialised to those operands:
 *
 *   product  the 24-bit significand of e times |v| (normalised to [128, 256) by a table) is exact
 *            in 32 bits (< 2^32); one rounding of its top 24 bits gives the float32 product
 *   sum      the accumulator is kept unpacked (significand at bits [29:6], biased exponent, sign)
 *            over the whole sum; the addend is aligned with a sticky bit, added or subtracted,
 *            normalised and rounded at bit 6 (guard bit 5, sticky bits 4..0)
 *
 * Every case the fast path does not cover exactly (a zero, subnormal, infinite or NaN error, a
 * product or sum that overflows, a sum that becomes subnormal) is computed by the float32
 * operations themselves (mt_m0_f32_mac_slow: the same `acc + (float)v * e`), so the results are
 * the reference kernels' bits in every case, on every core. An accumulator the fast path cannot
 * hold (subnormal, infinite, NaN) stays packed (exponent MT_M0_F32_PACKED) and every later term of
 * that sum takes the float32 operations.
 * NOTE: the sums start from +0.0 and round to nearest, so an accumulator is never -0.0: adding a
 * +-0.0 product leaves a finite accumulator unchanged and is skipped.
 */
#ifndef MT_M0_F32_H
#define MT_M0_F32_H

#include <stdint.h>
#include <string.h>

#include "mt_m0.h"

/*
 * 1: the sums in integers (a core without single-precision floating point: ARMv6-M, RV32 without
 * F); 0: the float32 operations of the core (RV32 with F, an FPU), which are faster there. Both
 * give the same bits; tests set it to test the integer path on any host.
 */
#ifndef MT_M0_F32_SOFT
#if (defined(__riscv_flen) && __riscv_flen >= 32) || (defined(__ARM_FP) && (__ARM_FP & 4)) || \
    defined(__SSE_MATH__) || defined(__aarch64__)
#define MT_M0_F32_SOFT 0
#else /* no single-precision hardware */
#define MT_M0_F32_SOFT 1
#endif /* hardware float32 */
#endif /* MT_M0_F32_SOFT */

/* The exponent of an accumulator holding +0.0 (so far below any addend's that it is replaced). */
#define MT_M0_F32_ZERO (-1024)
/* The exponent of an accumulator kept packed (its bits in `m`): subnormal, infinite or NaN. */
#define MT_M0_F32_PACKED 0x40000000

/* An unpacked float32: value = (-1)^(s >> 31) * m * 2^(e - 156), m in [2^29, 2^30); or +0.0; or packed. */
typedef struct {
    uint32_t m;
    int32_t e;
    uint32_t s;
} mt_m0_f32;

/* |v| << (7 - floor(log2 |v|)) in [128, 256) (index 0 unused). */
static const uint8_t mt_m0_f32_norm[256] = {
    0,   128, 128, 192, 128, 160, 192, 224, 128, 144, 160, 176, 192, 208, 224, 240, 128, 136, 144, 152,
    160, 168, 176, 184, 192, 200, 208, 216, 224, 232, 240, 248, 128, 132, 136, 140, 144, 148, 152, 156,
    160, 164, 168, 172, 176, 180, 184, 188, 192, 196, 200, 204, 208, 212, 216, 220, 224, 228, 232, 236,
    240, 244, 248, 252, 128, 130, 132, 134, 136, 138, 140, 142, 144, 146, 148, 150, 152, 154, 156, 158,
    160, 162, 164, 166, 168, 170, 172, 174, 176, 178, 180, 182, 184, 186, 188, 190, 192, 194, 196, 198,
    200, 202, 204, 206, 208, 210, 212, 214, 216, 218, 220, 222, 224, 226, 228, 230, 232, 234, 236, 238,
    240, 242, 244, 246, 248, 250, 252, 254, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139,
    140, 141, 142, 143, 144, 145, 146, 147, 148, 149, 150, 151, 152, 153, 154, 155, 156, 157, 158, 159,
    160, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 173, 174, 175, 176, 177, 178, 179,
    180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197, 198, 199,
    200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219,
    220, 221, 222, 223, 224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239,
    240, 241, 242, 243, 244, 245, 246, 247, 248, 249, 250, 251, 252, 253, 254, 255};

/* floor(log2 |v|) (index 0 unused). */
static const uint8_t mt_m0_f32_log2[256] = {
    0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5,
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6,
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7};

static inline uint32_t mt_m0_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float mt_m0_f32_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The float32 bits of an accumulator. */
static inline uint32_t mt_m0_f32_pack(const mt_m0_f32 *a)
{
    if (a->e == MT_M0_F32_ZERO) {
        return 0u;
    }
    if (a->e == MT_M0_F32_PACKED) {
        return a->m;
    }
    return a->s | ((((uint32_t)a->e - 1u) << 23) + (a->m >> 6));
}

/* An accumulator holding the float32 `u` (unpacked when normal or +0.0, packed otherwise). */
static inline void mt_m0_f32_unpack(mt_m0_f32 *a, uint32_t u)
{
    const uint32_t ex = (u << 1) >> 24;
    a->s = u & 0x80000000u;
    if (u == 0u) {
        a->m = 0u;
        a->e = MT_M0_F32_ZERO;
    } else if (ex == 0u || ex == 255u) {
        a->m = u;
        a->e = MT_M0_F32_PACKED;
    } else {
        a->m = ((u << 8) | 0x80000000u) >> 2;
        a->e = (int32_t)ex;
    }
}

/* The bits of acc + (float)v * e by the float32 operations (every case the fast path leaves). */
static MT_M0_UNUSED uint32_t __attribute__((noinline)) mt_m0_f32_mac_slow(uint32_t acc, uint32_t e, int32_t v)
{
    const float p = (float)v * mt_m0_f32_float(e);
    return mt_m0_f32_bits(mt_m0_f32_float(acc) + p);
}

/* The bits of a + b by the float32 add. */
static MT_M0_UNUSED uint32_t __attribute__((noinline)) mt_m0_f32_add_slow(uint32_t a, uint32_t b)
{
    return mt_m0_f32_bits(mt_m0_f32_float(a) + mt_m0_f32_float(b));
}

/*
 * acc = acc + b for an unpacked non-zero b (mb in [2^29, 2^30), 1 <= eb <= 254) and an accumulator
 * that is +0.0 or unpacked; returns 0, or 1 (acc untouched) when the result is not a normal float32
 * (or acc is packed) and the float32 operations must compute it.
 */
static inline int mt_m0_f32_add_fast(mt_m0_f32 *a, uint32_t mb, int32_t eb, uint32_t sb)
{
    uint32_t ma = a->m;
    int32_t ea = a->e;
    uint32_t sa = a->s;
    uint32_t small;
    uint32_t sum;
    int32_t d = ea - eb;
    if (d < 0) { /* b is the larger exponent: swap */
        const uint32_t t = ma;
        const uint32_t ts = sa;
        ma = mb;
        mb = t;
        sa = sb;
        sb = ts;
        ea = eb;
        d = -d;
    }
    if (d >= 26) { /* the smaller one is below half an ulp of the larger (or +0.0): no change */
        if (ea > 254) {
            return 1;
        }
        a->m = ma;
        a->e = ea;
        a->s = sa;
        return 0;
    }
    small = mb >> d;
    if (d > 6 && (mb << (32 - d)) != 0u) {
        small |= 1u; /* sticky */
    }
    if (sa == sb) {
        sum = ma + small;
        if (sum >= 0x40000000u) {
            sum = (sum >> 1) | (sum & 1u);
            ++ea;
        }
    } else {
        if (small > ma) {
            sum = small - ma;
            sa = sb;
        } else {
            sum = ma - small;
        }
        if (sum == 0u) {
            a->m = 0u;
            a->e = MT_M0_F32_ZERO;
            a->s = 0u;
            return 0;
        }
        while (sum < 0x20000000u) {
            sum <<= 1;
            --ea;
        }
        if (ea < 1) {
            return 1;
        }
    }
    sum += 0x1Fu + ((sum >> 6) & 1u);
    sum &= ~0x3Fu;
    if (sum >= 0x40000000u) {
        sum >>= 1;
        ++ea;
    }
    if (ea > 254) {
        return 1;
    }
    a->m = sum;
    a->e = ea;
    a->s = sa;
    return 0;
}

/*
 * acc = acc + (float)v * e (e the float32 bits) for an unpacked or +0.0 accumulator, e != +-0.0 and
 * v != 0; returns 1 (acc untouched) when e is not normal or the result is not a normal float32.
 */
static inline int mt_m0_f32_mac_fast(mt_m0_f32 *a, uint32_t e, int32_t v)
{
    const uint32_t ee = (e << 1) >> 24;
    const uint32_t neg = (uint32_t)(v >> 31);
    const uint32_t av = ((uint32_t)v ^ neg) - neg;
    uint32_t p;
    uint32_t r;
    int32_t eb;
    if (ee - 1u >= 254u) { /* subnormal, infinite or NaN e */
        return 1;
    }
    p = (((e << 8) | 0x80000000u) >> 8) * mt_m0_f32_norm[av]; /* in [2^30, 2^32) */
    eb = (int32_t)ee + mt_m0_f32_log2[av];
    if (p < 0x80000000u) {
        p <<= 1;
    } else {
        ++eb;
    }
    r = p + 0x7Fu + ((p >> 8) & 1u);
    if (r < p) { /* the rounding carried out: the significand is 2^24 */
        r = 0x80000000u;
        ++eb;
    }
    return eb > 254 || mt_m0_f32_add_fast(a, (r >> 8) << 6, eb, (e ^ neg) & 0x80000000u);
}

/*
 * out = a * b (float32 bits, both normal), rounded to nearest even: the 48-bit product of the
 * significands from four 12x12-bit partial products (MULS has no high half); returns 1 (out
 * untouched) when an operand is not normal or the product is not a normal float32.
 */
static inline int mt_m0_f32_mul_fast(mt_m0_f32 *out, uint32_t a, uint32_t b)
{
    const uint32_t ea = (a << 1) >> 24;
    const uint32_t eb = (b << 1) >> 24;
    const uint32_t ga = ((a << 8) | 0x80000000u) >> 8;
    const uint32_t gb = ((b << 8) | 0x80000000u) >> 8;
    const uint32_t cross = (ga >> 12) * (gb & 0xFFFu) + (ga & 0xFFFu) * (gb >> 12);
    const uint32_t low = (ga & 0xFFFu) * (gb & 0xFFFu) + ((cross & 0xFFFu) << 12);
    uint32_t hi = (ga >> 12) * (gb >> 12) + (cross >> 12) + (low >> 24); /* product = hi * 2^24 + rest */
    uint32_t rest = low & 0xFFFFFFu;
    int32_t e = (int32_t)(ea + eb) - 126;
    if (ea - 1u >= 254u || eb - 1u >= 254u) {
        return 1;
    }
    if (hi < 0x800000u) { /* a 47-bit product: one more bit into the significand */
        hi = (hi << 1) | (rest >> 23);
        rest = (rest << 1) & 0xFFFFFFu;
        --e;
    }
    if (rest > 0x800000u || (rest == 0x800000u && (hi & 1u))) {
        if (++hi == 0x1000000u) {
            hi = 0x800000u;
            ++e;
        }
    }
    if (e < 1 || e > 254) {
        return 1;
    }
    out->m = hi << 6;
    out->e = e;
    out->s = (a ^ b) & 0x80000000u;
    return 0;
}

/* acc = acc + b (both accumulators), bit-exact with the float32 add. */
static inline void mt_m0_f32_add(mt_m0_f32 *a, const mt_m0_f32 *b)
{
    if (!MT_M0_F32_SOFT) {
        mt_m0_f32_unpack(a, mt_m0_f32_add_slow(mt_m0_f32_pack(a), mt_m0_f32_pack(b)));
        return;
    }
    if (b->e == MT_M0_F32_ZERO && a->e != MT_M0_F32_PACKED) {
        return;
    }
    if (b->e == MT_M0_F32_PACKED || mt_m0_f32_add_fast(a, b->m, b->e, b->s)) {
        mt_m0_f32_unpack(a, mt_m0_f32_add_slow(mt_m0_f32_pack(a), mt_m0_f32_pack(b)));
    }
}

/*
 * acc = acc + sum_{k < n} (float)(x[k * xstep] - zx) * e[k * estep], term by term in k order:
 * the one inner loop of every BP-QAS adjoint, its accumulator in registers. A +-0.0 product (most
 * errors are 0.0 behind a ReLU or a max pool) is skipped first; once the accumulator is packed the
 * rest of the terms take the float32 operations.
 */
static MT_M0_UNUSED void __attribute__((noinline)) mt_m0_f32_run(mt_m0_f32 *acc,
                                                                const float *e,
                                                                int32_t estep,
                                                                const int8_t *x,
                                                                int32_t xstep,
                                                                int32_t zx,
                                                                int32_t n)
{
    mt_m0_f32 a = *acc;
    const float *end = e + n * estep;
    uint32_t u;
    if (MT_M0_F32_SOFT && a.e != MT_M0_F32_PACKED) {
        for (; e != end; e += estep, x += xstep) {
            const uint32_t eb = mt_m0_f32_bits(*e);
            const int32_t v = *x - zx;
            if ((eb << 1) == 0u || (v == 0 && (eb << 1) < 0xFF000000u)) {
                continue; /* a +-0.0 product */
            }
            if (mt_m0_f32_mac_fast(&a, eb, v)) {
                mt_m0_f32_unpack(&a, mt_m0_f32_mac_slow(mt_m0_f32_pack(&a), eb, v));
                if (a.e == MT_M0_F32_PACKED) {
                    e += estep;
                    x += xstep;
                    break;
                }
            }
        }
    }
    if (e == end) {
        *acc = a;
        return;
    }
    u = mt_m0_f32_pack(&a);
    if (!MT_M0_F32_SOFT) { /* the core's float32: a +-0.0 product leaves the sum (never -0.0) as it is */
        float s = mt_m0_f32_float(u);
        for (; e != end; e += estep, x += xstep) {
            if (*e != 0.0f) {
                s = s + (float)(*x - zx) * *e;
            }
        }
        u = mt_m0_f32_bits(s);
    }
    for (; e != end; e += estep, x += xstep) {
        u = mt_m0_f32_mac_slow(u, mt_m0_f32_bits(*e), *x - zx);
    }
    mt_m0_f32_unpack(acc, u);
}

#endif /* MT_M0_F32_H */
