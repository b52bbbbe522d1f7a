/*
 * mcutrain runtime: fixed-point requantization and rounding (docs/integer-semantics.md).
 *
 * mt_requantize is the one requantize function of the C runtime; it mirrors
 * mcutrain.quant.fixedpoint.requantize_output bit for bit:
 *
 *     p = acc * multiplier                       (int64; |p| < 2^62)
 *     r = sign(p) * ((|p| + 2^(n-1)) >> n)       n = 31 - shift, one rounding, half away from 0
 *     y = clamp(r + zero_point, act_min, act_max)
 *
 * i.e. round_half_away(acc * M) + z with M = multiplier * 2^(shift - 31), a right shift by
 * n in [1, 62] (shift in [-31, 30]); a positive `shift` is a smaller right shift (M larger).
 */
#ifndef MT_FIXEDPOINT_H
#define MT_FIXEDPOINT_H

#include <stdint.h>

#include "mt_arch.h"

/*
 * round_half_away(x / 2^n) for n in [1, 62] and |x| + 2^(n-1) < 2^63.
 * NOTE: only non-negative values are shifted, so no implementation-defined shift of a negative
 * number is involved; the sign is restored afterwards.
 */
MT_INLINE int64_t mt_rounding_shift_right_s64(int64_t x, int32_t n)
{
    const uint64_t half = (uint64_t)1 << (n - 1);
    const uint64_t mag = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
    const int64_t r = (int64_t)((mag + half) >> n);
    return x < 0 ? -r : r;
}

/*
 * The requantization of every conv2d / linear output:
 * clamp(round_half_away(acc * multiplier / 2^(31 - shift)) + zero_point, act_min, act_max).
 *   acc         in: int32 accumulator (bias + sum of products)
 *   multiplier  in: [2^30, 2^31), or 0 (M < 2^-32: the result is zero_point)
 *   shift       in: [-31, 30]
 *   zero_point  in: output zero point, [-128, 127]
 *   act_min/max in: output clamp, -128 <= act_min <= act_max <= 127
 * Returns the int8 output value.
 */
MT_INLINE int8_t mt_requantize(int32_t acc,
                               int32_t multiplier,
                               int32_t shift,
                               int32_t zero_point,
                               int32_t act_min,
                               int32_t act_max)
{
    const int32_t n = 31 - shift;
    const uint32_t mag = acc < 0 ? (uint32_t)0 - (uint32_t)acc : (uint32_t)acc;
    const uint64_t p = (uint64_t)mag * (uint32_t)multiplier; /* |p| < 2^62 */
    uint32_t r;                                             /* |rounded result|, saturated */
    int32_t y;
    if (n > 32) {
        /* NOTE: 2^(n-1) is a multiple of 2^32 here, so adding it changes only the high word and
           (p + 2^(n-1)) >> n == ((p >> 32) + 2^(n-33)) >> (n-32): exact, in 32-bit arithmetic,
           and the result is below 2^30. */
        r = ((uint32_t)(p >> 32) + ((uint32_t)1 << (n - 33))) >> (n - 32);
    } else {
        const uint64_t r64 = (p + ((uint64_t)1 << (n - 1))) >> n;
        /* NOTE: any magnitude >= 2^16 clamps to act_min / act_max below exactly as the exact
           value would (|zero_point| <= 128), so saturating it keeps the arithmetic in 32 bits. */
        r = r64 > 0xFFFFu ? 0xFFFFu : (uint32_t)r64;
    }
    y = (acc < 0 ? -(int32_t)r : (int32_t)r) + zero_point;
    y = y < act_min ? act_min : y;
    y = y > act_max ? act_max : y;
    return (int8_t)y;
}

#if MT_DSP

/*
 * mt_requantize prepared once per output channel, for the DSP kernels' inner blocks. For a
 * channel with 33 <= n <= 54 (sh = n - 32 in [1, 22], i.e. shift in [-23, -2], which covers every
 * conv2d / linear layer whose real multiplier lies in [2^-24, 2^-3)) and an output clamp
 * [-128, 127],
 *
 *     mt_requantize_fast(acc, multiplier, sh, c1) == mt_requantize(acc, multiplier, shift, zp, -128, 127)
 *     with sh = -1 - shift and c1 = mt_requant_c1(sh, zp).
 *
 * Why it is exact: with neg = -1 for acc < 0 else 0, round_half_away(p / 2^n) is
 * floor((p + 2^(n-1) + neg) / 2^n) (for p < 0 that floor is -floor((|p| + 2^(n-1)) / 2^n)), and
 * adding zp * 2^n adds zp after the division. All of it is one 64-bit multiply-accumulate
 * (SMLAL) onto (hi, lo) = (c1 + neg, neg) with c1 = 2^(sh-1) + zp * 2^sh, whose high word is
 * then shifted right by sh (the low word only carries). Range: |p| < 2^62, so the high word is
 * below 2^30 + 129 * 2^22 + 1 < 2^31 in magnitude: no overflow. Cost: 5 instructions per output
 * instead of about 25.
 * NOTE: relies on >> of a negative int32 / int64 being arithmetic (as GCC, Clang, armclang and
 * IAR define it); the typedef below stops a compiler that does otherwise.
 */
typedef char mt_arithmetic_shift_check[(-1 >> 1) == -1 ? 1 : -1];

/* 1 when the channel's `shift` allows mt_requantize_fast (sh = -1 - shift in [1, 22]). */
MT_INLINE int mt_requant_fast_ok(int32_t multiplier, int32_t shift)
{
    return multiplier != 0 && shift >= -23 && shift <= -2;
}

/* The rounding-and-zero-point constant c1 = 2^(sh-1) + zp * 2^sh (|c1| < 2^30). */
MT_INLINE int32_t mt_requant_c1(int32_t sh, int32_t zero_point)
{
    return (int32_t)((uint32_t)1 << (sh - 1)) + zero_point * (int32_t)((uint32_t)1 << sh);
}

/* clamp(round_half_away(acc * multiplier / 2^(32 + sh)) + zp, -128, 127); see above. */
MT_INLINE int32_t mt_requantize_fast(int32_t acc, int32_t multiplier, int32_t sh, int32_t c1)
{
#if defined(MT_DSP_NATIVE)
    int32_t lo, hi;
    __asm__("asr   %[lo], %[acc], #31\n\t"
            "add   %[hi], %[c1], %[lo]\n\t"
            "smlal %[lo], %[hi], %[acc], %[m]\n\t"
            "asr   %[hi], %[hi], %[sh]\n\t"
            "ssat  %[hi], #8, %[hi]"
            : [lo] "=&r"(lo), [hi] "=&r"(hi)
            : [acc] "r"(acc), [m] "r"(multiplier), [sh] "r"(sh), [c1] "r"(c1));
    (void)lo;
    return hi;
#else  /* !MT_DSP_NATIVE */
    const int64_t neg = acc < 0 ? -1 : 0;
    const int64_t t = (int64_t)acc * multiplier + (int64_t)c1 * ((int64_t)1 << 32) + neg;
    const int32_t y = (int32_t)(t >> 32) >> sh;
    return y < -128 ? -128 : (y > 127 ? 127 : y);
#endif /* MT_DSP_NATIVE */
}

/*
 * mt_requantize_fast without the sign correction, for layers whose output zero point is -128 and
 * whose clamp is [-128, 127] (every conv2d / linear with a fused relu after post-training
 * quantization):
 *
 *     mt_requantize_floor(acc, multiplier, sh, c1) == mt_requantize_fast(acc, multiplier, sh, c1)
 *     when zero_point == -128 (c1 = mt_requant_c1(sh, -128)).
 *
 * Why it is exact: the two differ only for acc < 0, where mt_requantize_fast rounds half away
 * from zero and this one rounds half up; both results are then <= 0 before the zero point is
 * added, so both outputs saturate to -128. Cost: 3 instructions (SMMLA, ASR, SSAT): SMMLA adds
 * the high word of acc * multiplier to c1, flooring, and the floors of the two divisions nest.
 */
MT_INLINE int32_t mt_requantize_floor(int32_t acc, int32_t multiplier, int32_t sh, int32_t c1)
{
#if defined(MT_DSP_NATIVE)
    int32_t hi;
    __asm__("smmla %[hi], %[acc], %[m], %[c1]\n\t"
            "asr   %[hi], %[hi], %[sh]\n\t"
            "ssat  %[hi], #8, %[hi]"
            : [hi] "=&r"(hi)
            : [acc] "r"(acc), [m] "r"(multiplier), [sh] "r"(sh), [c1] "r"(c1));
    return hi;
#else  /* !MT_DSP_NATIVE */
    const int64_t t = (int64_t)acc * multiplier + (int64_t)c1 * ((int64_t)1 << 32);
    const int32_t y = (int32_t)(t >> 32) >> sh;
    return y < -128 ? -128 : (y > 127 ? 127 : y);
#endif /* MT_DSP_NATIVE */
}

#endif /* MT_DSP */

/* round_half_away(num / den) for den > 0 with C's truncating division (avgpool). */
MT_INLINE int32_t mt_rounding_divide_s32(int32_t num, int32_t den)
{
    return (num >= 0 ? num + den / 2 : num - den / 2) / den;
}

#endif /* MT_FIXEDPOINT_H */
