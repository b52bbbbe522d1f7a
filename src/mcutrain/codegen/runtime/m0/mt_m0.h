/*
 * mcutrain runtime: the shared pieces of the ARMv6-M (Cortex-M0+) twins in m0/ (not part of the API).
 *
 * Why a twin folder: ARMv6-M has eight low registers, a 32x32->32 MULS and nothing wider, no
 * SMLAD and no divide. The reference loops compile there to a 64-bit multiply (__muldi3) per
 * requantization, a division per output (__divsi3) and about 17 instructions per MAC. The twins
 * compute the same exact integers with what the core has:
 *
 *   mt_m0_dot4_run  four output channels at once over one or more runs: each input byte is
 *                   loaded and shifted by -z_x once, then one LDRSB + MULS + ADD per channel, the
 *                   four sums in high registers (16 instructions per four MACs in Thumb-1
 *                   assembly; a portable C loop elsewhere)
 *   mt_m0_requantize mt_requantize of the library's mode, its 32x32->64 product built from four
 *                   16x16 partial products (exact for every uint32 pair), no __muldi3
 *   mt_m0_requantize_single  the same for mt_requantize_single (FQT's error requantizations)
 *   mt_m0_col4_run  four weight columns against a row of int16 errors (FQT's error propagation):
 *                   per non-zero error one LDRSH, then LDRSB + MULS + ADD per column (19
 *                   instructions per four MACs in Thumb-1 assembly; a portable C loop elsewhere)
 *
 * Both are bit-exact with the reference on every core (every sum is the same exact integer sum),
 * so an m0/ library also builds and runs, with the same results, on any host.
 */
#ifndef MT_M0_H
#define MT_M0_H

#include <stdint.h>

#include "mt_arch.h"
#include "mt_config.h"

/* The Thumb-1 assembly path: an ARMv6-M core (Thumb without Thumb-2) and GCC or Clang. */
#if defined(__GNUC__) && defined(__thumb__) && !defined(__thumb2__) && !defined(MT_M0_PORTABLE)
#define MT_M0_ASM 1
#else /* another core or compiler, or MT_M0_PORTABLE */
#define MT_M0_ASM 0
#endif /* ARMv6-M with GCC */

/* The dot product is a static function (the assembly one cannot be inlined): unused is no warning. */
#if defined(__GNUC__)
#define MT_M0_UNUSED __attribute__((unused))
#else /* !defined(__GNUC__) */
#define MT_M0_UNUSED
#endif /* __GNUC__ */

/*
 * One four-channel dot product over `rows` runs (mt_m0_dot4_run): for each run r < rows,
 *     acc[k] += sum_{i < len} (x[r * xrow + i] - zx) * w_k[r * wrow + i]
 * with x and w_k addressed from the ENDS of their first runs (x_end = x + len, ...), so one
 * index from -len up to 0 serves the five loads and the loop's test. Repeat a weight row for
 * fewer channels (the extra sums are computed and unused). len >= 1, rows >= 1.
 * NOTE: the sums are exact: |acc| <= |bias| + 255 * sum|w| < 2^31 (checked at export).
 * NOTE: the assembly reads the fields at the byte offsets of the comments (every field 4 bytes).
 */
typedef struct {
    const int8_t *x_end;  /*  0 */
    const int8_t *w_end[4]; /*  4, 8, 12, 16 */
    int32_t neg_len;      /* 20: -len */
    int32_t neg_zx;       /* 24: -zx */
    int32_t acc[4];       /* 28, 32, 36, 40: in and out */
    int32_t rows;         /* 44: runs left, consumed by the call */
    int32_t wrow;         /* 48: weight bytes from one run to the next */
    int32_t xrow;         /* 52: input bytes from one run to the next */
} mt_m0_dot;

/* Compile-time check of the layout the assembly assumes (a negative array size fails to build). */
typedef char mt_m0_dot_layout[(sizeof(void *) != 4 || sizeof(mt_m0_dot) == 56) ? 1 : -1];

#if MT_M0_ASM
/*
 * The Thumb-1 loop: 16 instructions per four MACs (LDRSB + ADD for the input byte, then LDRSB,
 * MULS and ADD per channel, ADDS + BNE), the four sums in r8-r11 and -zx in r12; 14 instructions
 * from one run to the next; about 40 per call. Naked: the register use is all its own.
 */
static MT_M0_UNUSED void __attribute__((naked, noinline)) mt_m0_dot4_run(mt_m0_dot *d MT_M0_UNUSED)
{
    __asm__ volatile(".syntax unified\n\t"
                     "push  {r4, r5, r6, r7, lr}\n\t"
                     "mov   r1, r8\n\t"
                     "mov   r2, r9\n\t"
                     "mov   r3, r10\n\t"
                     "mov   r4, r11\n\t"
                     "push  {r0, r1, r2, r3, r4}\n\t"
                     "ldr   r1, [r0, #24]\n\t"
                     "mov   ip, r1\n\t"
                     "ldr   r1, [r0, #28]\n\t"
                     "mov   r8, r1\n\t"
                     "ldr   r1, [r0, #32]\n\t"
                     "mov   r9, r1\n\t"
                     "ldr   r1, [r0, #36]\n\t"
                     "mov   r10, r1\n\t"
                     "ldr   r1, [r0, #40]\n\t"
                     "mov   r11, r1\n\t"
                     "ldr   r7, [r0, #20]\n\t"
                     "ldr   r6, [r0, #16]\n\t"
                     "ldr   r5, [r0, #12]\n\t"
                     "ldr   r4, [r0, #8]\n\t"
                     "ldr   r3, [r0, #4]\n\t"
                     "ldr   r2, [r0, #0]\n\t"
                     "1:\n\t"
                     "ldrsb r0, [r2, r7]\n\t"
                     "add   r0, ip\n\t"
                     "ldrsb r1, [r3, r7]\n\t"
                     "muls  r1, r0, r1\n\t"
                     "add   r8, r1\n\t"
                     "ldrsb r1, [r4, r7]\n\t"
                     "muls  r1, r0, r1\n\t"
                     "add   r9, r1\n\t"
                     "ldrsb r1, [r5, r7]\n\t"
                     "muls  r1, r0, r1\n\t"
                     "add   r10, r1\n\t"
                     "ldrsb r1, [r6, r7]\n\t"
                     "muls  r1, r0, r1\n\t"
                     "add   r11, r1\n\t"
                     "adds  r7, r7, #1\n\t"
                     "bne   1b\n\t"
                     /* the next run: the struct from the stack, both strides, the index reset */
                     "ldr   r0, [sp, #0]\n\t"
                     "ldr   r1, [r0, #44]\n\t"
                     "subs  r1, r1, #1\n\t"
                     "str   r1, [r0, #44]\n\t"
                     "beq   2f\n\t"
                     "ldr   r1, [r0, #48]\n\t"
                     "adds  r3, r3, r1\n\t"
                     "adds  r4, r4, r1\n\t"
                     "adds  r5, r5, r1\n\t"
                     "adds  r6, r6, r1\n\t"
                     "ldr   r1, [r0, #52]\n\t"
                     "adds  r2, r2, r1\n\t"
                     "ldr   r7, [r0, #20]\n\t"
                     "b     1b\n\t"
                     "2:\n\t"
                     "pop   {r0, r1, r2, r3, r4}\n\t"
                     "mov   r5, r8\n\t"
                     "str   r5, [r0, #28]\n\t"
                     "mov   r5, r9\n\t"
                     "str   r5, [r0, #32]\n\t"
                     "mov   r5, r10\n\t"
                     "str   r5, [r0, #36]\n\t"
                     "mov   r5, r11\n\t"
                     "str   r5, [r0, #40]\n\t"
                     "mov   r8, r1\n\t"
                     "mov   r9, r2\n\t"
                     "mov   r10, r3\n\t"
                     "mov   r11, r4\n\t"
                     "pop   {r4, r5, r6, r7, pc}\n\t");
}
#else  /* !MT_M0_ASM: the same sums in C */
static MT_M0_UNUSED void mt_m0_dot4_run(mt_m0_dot *d)
{
    const int32_t len = -d->neg_len;
    const int32_t zx = -d->neg_zx;
    const int8_t *x = d->x_end - len;
    const int8_t *w0 = d->w_end[0] - len, *w1 = d->w_end[1] - len, *w2 = d->w_end[2] - len;
    const int8_t *w3 = d->w_end[3] - len;
    int32_t a0 = d->acc[0], a1 = d->acc[1], a2 = d->acc[2], a3 = d->acc[3];
    int32_t r, i;
    for (r = d->rows; r > 0; r--) {
        MT_UNROLL_DOT
        for (i = 0; i < len; i++) {
            const int32_t v = (int32_t)x[i] - zx;
            a0 += v * w0[i];
            a1 += v * w1[i];
            a2 += v * w2[i];
            a3 += v * w3[i];
        }
        x += d->xrow;
        w0 += d->wrow;
        w1 += d->wrow;
        w2 += d->wrow;
        w3 += d->wrow;
    }
    d->rows = 0;
    d->acc[0] = a0;
    d->acc[1] = a1;
    d->acc[2] = a2;
    d->acc[3] = a3;
}
#endif /* MT_M0_ASM */

/*
 * One four-column weighted sum of int16 errors (mt_m0_col4_run): for t < n,
 *     acc[k] += e[t] * w[t * wstride + k]     (k < 4)
 * the error propagation's loop (a column block of the weights against the error row), with the
 * errors addressed from their END (e_end = e + n, neg_bytes = -2n), so one index from -2n up to 0
 * serves the error load and the loop's test. Zero errors are skipped (exact: they add nothing).
 * n >= 1.
 * NOTE: the sums are exact: the callers' bounds (|acc| < 2^31, checked at export) hold in any order.
 * NOTE: the assembly reads the fields at the byte offsets of the comments (every field 4 bytes).
 */
typedef struct {
    const int16_t *e_end; /*  0 */
    const int8_t *w;      /*  4: row 0 of the four columns */
    int32_t neg_bytes;    /*  8: -2n */
    int32_t wstride;      /* 12: weight bytes from one error's row to the next */
    int32_t acc[4];       /* 16, 20, 24, 28: in and out */
} mt_m0_col4;

typedef char mt_m0_col4_layout[(sizeof(void *) != 4 || sizeof(mt_m0_col4) == 32) ? 1 : -1];

#if MT_M0_ASM
/*
 * The Thumb-1 loop: per non-zero error 19 instructions for four MACs (LDRSH, the weight step,
 * the zero test, LDRB + SXTB for byte 0, LDRSB with the offsets 1-3 held in r4-r6, MULS and ADD
 * into r8-r11), 5 per zero error; about 40 per call. Naked: the register use is all its own.
 */
static MT_M0_UNUSED void __attribute__((naked, noinline)) mt_m0_col4_run(mt_m0_col4 *c MT_M0_UNUSED)
{
    __asm__ volatile(".syntax unified\n\t"
                     "push  {r4, r5, r6, r7, lr}\n\t"
                     "mov   r1, r8\n\t"
                     "mov   r2, r9\n\t"
                     "mov   r3, r10\n\t"
                     "mov   r4, r11\n\t"
                     "push  {r0, r1, r2, r3, r4}\n\t"
                     "ldr   r1, [r0, #16]\n\t"
                     "mov   r8, r1\n\t"
                     "ldr   r1, [r0, #20]\n\t"
                     "mov   r9, r1\n\t"
                     "ldr   r1, [r0, #24]\n\t"
                     "mov   r10, r1\n\t"
                     "ldr   r1, [r0, #28]\n\t"
                     "mov   r11, r1\n\t"
                     "ldr   r1, [r0, #12]\n\t"
                     "mov   ip, r1\n\t"
                     "ldr   r2, [r0, #0]\n\t"
                     "ldr   r3, [r0, #4]\n\t"
                     "ldr   r7, [r0, #8]\n\t"
                     "movs  r4, #1\n\t"
                     "movs  r5, #2\n\t"
                     "movs  r6, #3\n\t"
                     "1:\n\t"
                     "ldrsh r0, [r2, r7]\n\t"
                     "cmp   r0, #0\n\t"
                     "beq   2f\n\t"
                     "ldrb  r1, [r3, #0]\n\t"
                     "sxtb  r1, r1\n\t"
                     "muls  r1, r0, r1\n\t"
                     "add   r8, r1\n\t"
                     "ldrsb r1, [r3, r4]\n\t"
                     "muls  r1, r0, r1\n\t"
                     "add   r9, r1\n\t"
                     "ldrsb r1, [r3, r5]\n\t"
                     "muls  r1, r0, r1\n\t"
                     "add   r10, r1\n\t"
                     "ldrsb r1, [r3, r6]\n\t"
                     "muls  r1, r0, r1\n\t"
                     "add   r11, r1\n\t"
                     "2:\n\t"
                     "add   r3, ip\n\t"
                     "adds  r7, r7, #2\n\t"
                     "bne   1b\n\t"
                     "pop   {r0, r1, r2, r3, r4}\n\t"
                     "mov   r5, r8\n\t"
                     "str   r5, [r0, #16]\n\t"
                     "mov   r5, r9\n\t"
                     "str   r5, [r0, #20]\n\t"
                     "mov   r5, r10\n\t"
                     "str   r5, [r0, #24]\n\t"
                     "mov   r5, r11\n\t"
                     "str   r5, [r0, #28]\n\t"
                     "mov   r8, r1\n\t"
                     "mov   r9, r2\n\t"
                     "mov   r10, r3\n\t"
                     "mov   r11, r4\n\t"
                     "pop   {r4, r5, r6, r7, pc}\n\t");
}
#else  /* !MT_M0_ASM: the same sums in C */
static MT_M0_UNUSED void mt_m0_col4_run(mt_m0_col4 *c)
{
    const int32_t n = -c->neg_bytes / 2;
    const int16_t *e = c->e_end - n;
    const int8_t *w = c->w;
    int32_t a0 = c->acc[0], a1 = c->acc[1], a2 = c->acc[2], a3 = c->acc[3];
    int32_t t;
    for (t = 0; t < n; t++) {
        const int32_t ev = e[t];
        if (ev != 0) {
            a0 += ev * w[0];
            a1 += ev * w[1];
            a2 += ev * w[2];
            a3 += ev * w[3];
        }
        w += c->wstride;
    }
    c->acc[0] = a0;
    c->acc[1] = a1;
    c->acc[2] = a2;
    c->acc[3] = a3;
}
#endif /* MT_M0_ASM */

/*
 * Set up `d` for the four weight rows of channels [o, o + 4) of `outs` from `w` (channels `wch`
 * bytes apart), channels past the last repeating channel o, and the biases as the sums' start.
 */
MT_INLINE void mt_m0_dot4_channels(mt_m0_dot *d,
                                   const int8_t *w,
                                   int32_t wch,
                                   int32_t o,
                                   int32_t outs,
                                   const int32_t *bias)
{
    int32_t k;
    for (k = 0; k < 4; k++) {
        const int32_t on = o + k < outs;
        d->w_end[k] = w + (on ? k * wch : 0) - d->neg_len;
        d->acc[k] = on ? bias[o + k] : 0;
    }
}

/*
 * The exact 64-bit product a * b as (*hi, *lo) from four 16x16 partial products, for any uint32
 * a and b. NOTE: mid = al*bh + (ll >> 16) + (hl & 0xFFFF) <= (2^16-1)^2 + 2(2^16-1) = 2^32 - 1,
 * so no sum leaves 32 bits.
 */
MT_INLINE void mt_m0_mul_u32(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    const uint32_t al = a & 0xFFFFu, ah = a >> 16, bl = b & 0xFFFFu, bh = b >> 16;
    const uint32_t ll = al * bl;
    const uint32_t hl = ah * bl;
    const uint32_t mid = al * bh + (ll >> 16) + (hl & 0xFFFFu);
    *hi = ah * bh + (mid >> 16) + (hl >> 16);
    *lo = (mid << 16) | (ll & 0xFFFFu);
}

/*
 * (hi:lo + add) >> n for n in [1, 31], saturated to 0xFFFF; add < 2^32 and hi:lo + add < 2^63.
 * NOTE: as in mt_requantize_single, any magnitude >= 2^16 clamps exactly as the exact value.
 */
MT_INLINE uint32_t mt_m0_round_shift_sat16(uint32_t hi, uint32_t lo, uint32_t add, int32_t n)
{
    const uint32_t lo2 = lo + add;
    const uint32_t hi2 = hi + (lo2 < lo ? 1u : 0u);
    uint32_t r;
    if ((hi2 >> n) != 0) {
        return 0xFFFFu;
    }
    r = (lo2 >> n) | (hi2 << (32 - n));
    return r > 0xFFFFu ? 0xFFFFu : r;
}

/*
 * mt_requantize_single (mt_fixedpoint.h), bit for bit, without a 64-bit multiply: one rounding of
 * acc * multiplier / 2^n, n = 31 - shift in [1, 62], on the product's two words. Arguments as
 * mt_requantize_single; the inference layers' mode "single" and FQT's error requantizations.
 */
MT_INLINE int8_t mt_m0_requantize_single(int32_t acc,
                                         int32_t multiplier,
                                         int32_t shift,
                                         int32_t zero_point,
                                         int32_t act_min,
                                         int32_t act_max)
{
    uint32_t hi, lo, r;
    int32_t y;
    const int32_t n = 31 - shift;
    const uint32_t mag = acc < 0 ? (uint32_t)0 - (uint32_t)acc : (uint32_t)acc;
    if (acc < 0 ? act_min >= zero_point : act_max <= zero_point) {
        /* y = zero_point -/+ r with r >= 0 lies on the clamp's side of the zero point: the clamp
           wins whatever r is (a relu layer's every negative accumulator) */
        return (int8_t)(acc < 0 ? act_min : act_max);
    }
    if (multiplier != 0 && n > 30 && ((mag >> (n - 31)) >> 1) >= 256u) {
        /* r >= floor(|acc| m / 2^n) >= floor(|acc| / 2^(n-30)) >= 256 (m >= 2^30): saturated */
        return (int8_t)(acc < 0 ? act_min : act_max);
    }
    if (n > 32 && mag < 0x10000u) {
        /* the common case in two products: with m = mh 2^16 + ml, floor(|acc| m / 2^32)
           = floor((|acc| mh + floor(|acc| ml / 2^16)) / 2^16), every term below 2^31 + 2^16 */
        const uint32_t hi16 =
            (mag * ((uint32_t)multiplier >> 16) + ((mag * ((uint32_t)multiplier & 0xFFFFu)) >> 16)) >> 16;
        r = (hi16 + ((uint32_t)1 << (n - 33))) >> (n - 32);
        y = (acc < 0 ? -(int32_t)r : (int32_t)r) + zero_point;
        y = y < act_min ? act_min : y;
        y = y > act_max ? act_max : y;
        return (int8_t)y;
    }
    mt_m0_mul_u32(mag, (uint32_t)multiplier, &hi, &lo); /* < 2^62 */
    if (n > 32) {
        /* as mt_requantize_single: the half is a multiple of 2^32, only the high word moves */
        r = (hi + ((uint32_t)1 << (n - 33))) >> (n - 32);
    } else if (n == 32) {
        r = hi + (lo >> 31); /* < 2^30 + 1 */
        r = r > 0xFFFFu ? 0xFFFFu : r;
    } else {
        r = mt_m0_round_shift_sat16(hi, lo, (uint32_t)1 << (n - 1), n);
    }
    y = (acc < 0 ? -(int32_t)r : (int32_t)r) + zero_point;
    y = y < act_min ? act_min : y;
    y = y > act_max ? act_max : y;
    return (int8_t)y;
}

/*
 * mt_requantize (mt_fixedpoint.h) of the library's mode, bit for bit, without a 64-bit multiply:
 * the same formulas on the product's two words. Arguments as mt_requantize.
 */
MT_INLINE int8_t mt_m0_requantize(int32_t acc,
                                  int32_t multiplier,
                                  int32_t shift,
                                  int32_t zero_point,
                                  int32_t act_min,
                                  int32_t act_max)
{
#if MT_ROUNDING_TFLITE
    uint32_t hi, lo, r;
    int32_t y;
    /* MultiplyByQuantizedMultiplier: x = wrap32(acc * 2^l), |h| = (|x| m + 2^30 - [x < 0]) >> 31,
       then the half-away division by 2^right (mt_mbqm_magnitude) */
    const int32_t left = shift > 0 ? shift : 0;
    const int32_t right = shift > 0 ? 0 : -shift;
    const int32_t x = (int32_t)((uint32_t)acc << left);
    const uint32_t neg = x < 0 ? 1u : 0u;
    const uint32_t mag = neg ? (uint32_t)0 - (uint32_t)x : (uint32_t)x;
    uint32_t lo2, hi2, h;
    if (neg ? act_min >= zero_point : act_max <= zero_point) {
        return (int8_t)(neg ? act_min : act_max); /* the clamp wins whatever |h| is (see below) */
    }
    if (multiplier != 0 && ((mag >> right) >> 1) >= 256u) {
        /* |h| >= floor(|x| m / 2^31) >= floor(|x| / 2) (m >= 2^30), so the result is >= 256 */
        return (int8_t)(neg ? act_min : act_max);
    }
    if (mag < 0x10000u) {
        /* |x| < 2^16: with m = mh 2^16 + ml, p + c = D 2^16 + E, D = |x| mh + (|x| ml >> 16) < 2^31 + 2^16,
           E = (|x| ml & 0xFFFF) + c < 2^31, so h = floor((D + E / 2^16) / 2^15) = (D + (E >> 16)) >> 15 */
        const uint32_t b = mag * ((uint32_t)multiplier & 0xFFFFu);
        const uint32_t d = mag * ((uint32_t)multiplier >> 16) + (b >> 16);
        const uint32_t e = (b & 0xFFFFu) + (((uint32_t)1 << 30) - neg);
        h = (d + (e >> 16)) >> 15;
    } else {
        mt_m0_mul_u32(mag, (uint32_t)multiplier, &hi, &lo); /* < 2^62 */
        lo2 = lo + (((uint32_t)1 << 30) - neg);
        hi2 = hi + (lo2 < lo ? 1u : 0u);
        h = (hi2 << 1) | (lo2 >> 31); /* < 2^31 */
    }
    r = (h + (((uint32_t)1 << right) >> 1)) >> right;
    r = r > 0xFFFFu ? 0xFFFFu : r;
    y = (neg ? -(int32_t)r : (int32_t)r) + zero_point;
    y = y < act_min ? act_min : y;
    y = y > act_max ? act_max : y;
    return (int8_t)y;
#else  /* !MT_ROUNDING_TFLITE */
    return mt_m0_requantize_single(acc, multiplier, shift, zero_point, act_min, act_max);
#endif /* MT_ROUNDING_TFLITE */
}

/* The output side of a layer: zero point and clamp (mt_conv_params / mt_linear_params). */
typedef struct {
    int32_t zero_point;
    int32_t act_min;
    int32_t act_max;
} mt_m0_out;

/*
 * y[k] = mt_m0_requantize(acc[k], multiplier[k], shift[k], ...) for k < count.
 * NOTE: out of line, one short loop: its operands stay in registers, where inlined into the
 * pixel loops they were reloaded per output.
 */
static MT_M0_UNUSED MT_NOINLINE void mt_m0_requantize_run(const int32_t *acc,
                                                          const int32_t *multiplier,
                                                          const int32_t *shift,
                                                          int32_t count,
                                                          const mt_m0_out *out,
                                                          int8_t *y)
{
    const int32_t zp = out->zero_point, lo = out->act_min, hi = out->act_max;
    int32_t k;
    for (k = 0; k < count; k++) {
        y[k] = mt_m0_requantize(acc[k], multiplier[k], shift[k], zp, lo, hi);
    }
}

#endif /* MT_M0_H */
