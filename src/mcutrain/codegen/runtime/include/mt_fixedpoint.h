/*
 * mcutrain runtime: fixed-point requantization and rounding (docs/integer-semantics.md 6.1).
 *
 * mt_requantize is the one requantize function of the C runtime; it mirrors
 * mcutrain.quant.fixedpoint.requantize_output bit for bit, in the rounding mode the library was
 * exported for (MT_ROUNDING_TFLITE, mt_config.h):
 *
 * "single" (mt_requantize_single; fixedpoint.requantize):
 *     p = acc * multiplier                       (int64; |p| < 2^62)
 *     r = sign(p) * ((|p| + 2^(n-1)) >> n)       n = 31 - shift, one rounding, half away from 0
 *     y = clamp(r + zero_point, act_min, act_max)
 * i.e. round_half_away(acc * M) + z with M = multiplier * 2^(shift - 31), a right shift by
 * n in [1, 62] (shift in [-31, 30]); a positive `shift` is a smaller right shift (M larger).
 *
 * "tflite" (mt_requantize_tflite; fixedpoint.requantize_tflite): TFLite's
 * MultiplyByQuantizedMultiplier, l = max(shift, 0), r = max(-shift, 0):
 *     x = wrap32(acc * 2^l)                      (the int32 product TFLite computes)
 *     h = floor((x * multiplier + 2^30) / 2^31)  (SaturatingRoundingDoublingHighMul)
 *     y = clamp(round_half_away(h / 2^r) + zero_point, act_min, act_max)   (RoundingDivideByPOT)
 *
 * Backward (error) requantizations of FQT are single-rounding by FQT's own specification: they
 * call mt_requantize_single and mt_requantize_fast_single by name, which no mode reaches.
 */
#ifndef MT_FIXEDPOINT_H
#define MT_FIXEDPOINT_H

#include <stdint.h>

#include "mt_arch.h"
#include "mt_config.h"

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
 * Mode "single" of mt_requantize:
 * clamp(round_half_away(acc * multiplier / 2^(31 - shift)) + zero_point, act_min, act_max).
 *   acc         in: int32 accumulator (bias + sum of products)
 *   multiplier  in: [2^30, 2^31), or 0 (M < 2^-32: the result is zero_point)
 *   shift       in: [-31, 30]
 *   zero_point  in: output zero point, [-128, 127]
 *   act_min/max in: output clamp, -128 <= act_min <= act_max <= 127
 * Returns the int8 output value.
 */
MT_INLINE int8_t mt_requantize_single(int32_t acc,
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

/*
 * |round_half_away(h / 2^r)| of TFLite's MultiplyByQuantizedMultiplier for x = wrap32(acc * 2^l),
 * from |x| and the sign of x (the result carries the sign of x, or is 0):
 *     |h| = (|x| * multiplier + 2^30 - [x < 0]) >> 31
 * (for x < 0, floor((2^30 - P) / 2^31) = -ceil((P - 2^30) / 2^31) = -((P + 2^30 - 1) >> 31), P = |x| m),
 * then RoundingDivideByPOT's half-away division of |h| by 2^r: (|h| + 2^(r-1)) >> r (|h| for r = 0).
 * Only non-negative values are shifted; |h| < 2^31 (P < 2^62), so |h| + 2^(r-1) < 2^32.
 */
MT_INLINE uint32_t mt_mbqm_magnitude(uint32_t mag, uint32_t neg, int32_t multiplier, int32_t right)
{
    const uint64_t p = (uint64_t)mag * (uint32_t)multiplier; /* < 2^62 */
    const uint32_t h = (uint32_t)((p + (((uint32_t)1 << 30) - neg)) >> 31);
    return (h + (((uint32_t)1 << right) >> 1)) >> right;
}

/*
 * TFLite's MultiplyByQuantizedMultiplier(acc, multiplier, shift) as an int32, no zero point and
 * no clamp (TFLite's ADD and MEAN use it between their steps; fixedpoint.requantize_tflite).
 *   multiplier in: [0, 2^31); shift in: [-31, 30]
 */
MT_INLINE int32_t mt_multiply_by_quantized_multiplier(int32_t acc, int32_t multiplier, int32_t shift)
{
    const int32_t left = shift > 0 ? shift : 0;
    const int32_t x = (int32_t)((uint32_t)acc << left); /* TFLite's acc * (1 << left), wrapped */
    const uint32_t neg = x < 0 ? 1u : 0u;
    const uint32_t mag = neg ? (uint32_t)0 - (uint32_t)x : (uint32_t)x;
    const uint32_t r = mt_mbqm_magnitude(mag, neg, multiplier, shift > 0 ? 0 : -shift);
    return neg ? -(int32_t)r : (int32_t)r;
}

/*
 * Mode "tflite" of mt_requantize: clamp(MultiplyByQuantizedMultiplier(acc, multiplier, shift)
 * + zero_point, act_min, act_max); arguments as mt_requantize_single.
 */
MT_INLINE int8_t mt_requantize_tflite(int32_t acc,
                                      int32_t multiplier,
                                      int32_t shift,
                                      int32_t zero_point,
                                      int32_t act_min,
                                      int32_t act_max)
{
    const int32_t left = shift > 0 ? shift : 0;
    const int32_t x = (int32_t)((uint32_t)acc << left); /* TFLite's acc * (1 << left), wrapped */
    const uint32_t neg = x < 0 ? 1u : 0u;
    const uint32_t mag = neg ? (uint32_t)0 - (uint32_t)x : (uint32_t)x;
    uint32_t r = mt_mbqm_magnitude(mag, neg, multiplier, shift > 0 ? 0 : -shift);
    int32_t y;
    /* NOTE: as in mt_requantize_single, a magnitude >= 2^16 clamps exactly as the exact value. */
    r = r > 0xFFFFu ? 0xFFFFu : r;
    y = (neg ? -(int32_t)r : (int32_t)r) + zero_point;
    y = y < act_min ? act_min : y;
    y = y > act_max ? act_max : y;
    return (int8_t)y;
}

/*
 * The requantization of every conv2d / linear / depthwise output, in the library's mode:
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
#if MT_ROUNDING_TFLITE
    return mt_requantize_tflite(acc, multiplier, shift, zero_point, act_min, act_max);
#else  /* !MT_ROUNDING_TFLITE */
    return mt_requantize_single(acc, multiplier, shift, zero_point, act_min, act_max);
#endif /* MT_ROUNDING_TFLITE */
}

#if MT_DSP

/*
 * mt_requantize_single prepared once per output channel, for the DSP kernels' inner blocks. For a
 * channel with 33 <= n <= 54 (sh = n - 32 in [1, 22], i.e. shift in [-23, -2], which covers every
 * conv2d / linear layer whose real multiplier lies in [2^-24, 2^-3)) and an output clamp
 * [-128, 127],
 *
 *     mt_requantize_fast_single(acc, multiplier, sh, c1)
 *         == mt_requantize_single(acc, multiplier, shift, zp, -128, 127)
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

/* 1 when the channel's `shift` allows mt_requantize_fast_single (sh = -1 - shift in [1, 22]). */
MT_INLINE int mt_requant_fast_ok_single(int32_t multiplier, int32_t shift)
{
    return multiplier != 0 && shift >= -23 && shift <= -2;
}

/* The rounding-and-zero-point constant c1 = 2^(sh-1) + zp * 2^sh of both modes' prepared forms
   (|c1| < 2^30 + 2^22 for sh <= 23). */
MT_INLINE int32_t mt_requant_c1(int32_t sh, int32_t zero_point)
{
    return (int32_t)((uint32_t)1 << (sh - 1)) + zero_point * (int32_t)((uint32_t)1 << sh);
}

/* clamp(round_half_away(acc * multiplier / 2^(32 + sh)) + zp, -128, 127); see above. */
MT_INLINE int32_t mt_requantize_fast_single(int32_t acc, int32_t multiplier, int32_t sh, int32_t c1)
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
 * mt_requantize_fast_single without the sign correction, for layers whose output zero point is -128 and
 * whose clamp is [-128, 127] (every conv2d / linear with a fused relu after post-training
 * quantization):
 *
 *     mt_requantize_floor_single(acc, multiplier, sh, c1) == mt_requantize_fast_single(acc, multiplier, sh, c1)
 *     when zero_point == -128 (c1 = mt_requant_c1(sh, -128)).
 *
 * Why it is exact: the two differ only for acc < 0, where mt_requantize_fast_single rounds half away
 * from zero and this one rounds half up; both results are then <= 0 before the zero point is
 * added, so both outputs saturate to -128. Cost: 3 instructions (SMMLA, ASR, SSAT): SMMLA adds
 * the high word of acc * multiplier to c1, flooring, and the floors of the two divisions nest.
 */
MT_INLINE int32_t mt_requantize_floor_single(int32_t acc, int32_t multiplier, int32_t sh, int32_t c1)
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

/*
 * mt_requantize_tflite prepared once per output channel, the same way: for a channel with
 * multiplier in [2^30, 2^31), shift in [-23, -1] (r = -shift in [1, 23]) and clamp [-128, 127],
 *
 *     mt_requantize_fast_tflite(acc, m2, r, c1) == mt_requantize_tflite(acc, multiplier, shift, zp, -128, 127)
 *     with m2 = mt_requant_mult_tflite(multiplier) (2 * multiplier as an int32: 2m - 2^32),
 *     r = -shift and c1 = mt_requant_c1(r, zp) = 2^(r-1) + zp * 2^r.
 *
 * Why it is exact: SMMLAR(acc, m2, acc) is the high word of acc * 2^32 + acc * (2m - 2^32) + 2^31
 * = 2 acc m + 2^31 (|2 acc m| < 2^63), i.e. floor((acc m + 2^30) / 2^31) = h, TFLite's
 * SaturatingRoundingDoublingHighMul exactly (it saturates only for two INT32_MIN operands; m > 0),
 * and no left shift applies (shift < 0). RoundingDivideByPOT(h, r) is round_half_away(h / 2^r)
 * = floor((h - [h < 0] + 2^(r-1)) / 2^r) (r >= 1), and zp * 2^r added before the division is zp
 * added after it: y = (h - [h < 0] + c1) >> r. h > -2^31, so h - [h < 0] (ADD with ASR #31) is an
 * int32; the sum with c1 may not be, so QADD saturates it: a saturated sum shifted by r <= 23 is
 * still beyond [-128, 127] (|.| >= 2^8), on the same side as the exact sum, and SSAT gives the
 * same output. Cost: 5 instructions (SMMLAR, ADD, QADD, ASR, SSAT), as mt_requantize_fast_single.
 */
MT_INLINE int mt_requant_fast_ok_tflite(int32_t multiplier, int32_t shift)
{
    return multiplier >= (int32_t)1 << 30 && shift >= -23 && shift <= -1;
}

/* 2 * multiplier wrapped to int32 (2m - 2^32 for m in [2^30, 2^31)): SMMLAR's operand. */
MT_INLINE int32_t mt_requant_mult_tflite(int32_t multiplier)
{
    return (int32_t)((uint32_t)multiplier << 1);
}

/* clamp(RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc, m), r) + zp, -128, 127); above. */
MT_INLINE int32_t mt_requantize_fast_tflite(int32_t acc, int32_t m2, int32_t r, int32_t c1)
{
#if defined(MT_DSP_NATIVE)
    int32_t h;
    __asm__("smmlar %[h], %[acc], %[m], %[acc]\n\t"
            "add    %[h], %[h], %[h], asr #31\n\t"
            "qadd   %[h], %[h], %[c1]\n\t"
            "asr    %[h], %[h], %[r]\n\t"
            "ssat   %[h], #8, %[h]"
            : [h] "=&r"(h)
            : [acc] "r"(acc), [m] "r"(m2), [r] "r"(r), [c1] "r"(c1)
            : "cc");
    return h;
#else  /* !MT_DSP_NATIVE: the same steps, QADD's saturation included */
    const int32_t h = (int32_t)(((int64_t)acc * (int64_t)(uint32_t)m2 + ((int64_t)1 << 31)) >> 32);
    int64_t v = (int64_t)h - (h < 0) + c1;
    int32_t y;
    v = v > INT32_MAX ? INT32_MAX : (v < INT32_MIN ? INT32_MIN : v);
    y = (int32_t)v >> r;
    return y < -128 ? -128 : (y > 127 ? 127 : y);
#endif /* MT_DSP_NATIVE */
}

/*
 * mt_requantize_fast_tflite without the sign correction, for zero point -128 and clamp
 * [-128, 127]:
 *
 *     mt_requantize_floor_tflite(acc, m2, r, c1) == mt_requantize_fast_tflite(acc, m2, r, c1)
 *     when zero_point == -128 (c1 = mt_requant_c1(r, -128)).
 *
 * Why it is exact: the two differ only for h < 0 (acc < 0), where both results are <= 0 before
 * the zero point ((h + 2^(r-1)) / 2^r < 1), so both outputs saturate to -128. Cost: 4
 * instructions (SMMLAR, QADD, ASR, SSAT) against 3 for mt_requantize_floor_single: TFLite's
 * first rounding sits at bit 30 of the product, below the high word SMMLA could floor onto c1.
 */
MT_INLINE int32_t mt_requantize_floor_tflite(int32_t acc, int32_t m2, int32_t r, int32_t c1)
{
#if defined(MT_DSP_NATIVE)
    int32_t h;
    __asm__("smmlar %[h], %[acc], %[m], %[acc]\n\t"
            "qadd   %[h], %[h], %[c1]\n\t"
            "asr    %[h], %[h], %[r]\n\t"
            "ssat   %[h], #8, %[h]"
            : [h] "=&r"(h)
            : [acc] "r"(acc), [m] "r"(m2), [r] "r"(r), [c1] "r"(c1)
            : "cc");
    return h;
#else  /* !MT_DSP_NATIVE */
    const int32_t h = (int32_t)(((int64_t)acc * (int64_t)(uint32_t)m2 + ((int64_t)1 << 31)) >> 32);
    int64_t v = (int64_t)h + c1;
    int32_t y;
    v = v > INT32_MAX ? INT32_MAX : (v < INT32_MIN ? INT32_MIN : v);
    y = (int32_t)v >> r;
    return y < -128 ? -128 : (y > 127 ? 127 : y);
#endif /* MT_DSP_NATIVE */
}

/* SMMLAR(a, b, c): the high word of c * 2^32 + a * b + 2^31 (rounded most significant word). */
MT_INLINE int32_t mt_smmlar(int32_t a, int32_t b, int32_t c)
{
#if defined(MT_DSP_NATIVE)
    int32_t r;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
#else  /* !MT_DSP_NATIVE: in 64 bits, wrapping like the instruction */
    const uint64_t t = ((uint64_t)(uint32_t)c << 32) + (uint64_t)((int64_t)a * b) + ((uint64_t)1 << 31);
    return (int32_t)(uint32_t)(t >> 32);
#endif /* MT_DSP_NATIVE */
}

/*
 * TFLite's MultiplyByQuantizedMultiplier(x, multiplier, -r) prepared, for multiplier in [2^30, 2^31),
 * r in [0, 31] and |x| < 2^30 (TFLite's ADD: its operands stay below 2^28):
 *
 *     mt_mbqm_fast_tflite(x, m2, r, half, mask) == mt_multiply_by_quantized_multiplier(x, multiplier, -r)
 *     with m2 = mt_requant_mult_tflite(multiplier), half = 2^r >> 1, mask = r > 0 ? -1 : 0.
 *
 * Why it is exact: SMMLAR(x, m2, x) = h, SaturatingRoundingDoublingHighMul (see
 * mt_requantize_fast_tflite); RoundingDivideByPOT(h, r) = (h - [h < 0] + 2^(r-1)) >> r for r >= 1
 * and h for r = 0 (mask and half both 0). |h| <= |x| + 1 < 2^30, so h - 1 + 2^30 stays in int32.
 */
MT_INLINE int32_t mt_mbqm_fast_tflite(int32_t x, int32_t m2, int32_t r, int32_t half, int32_t mask)
{
    const int32_t h = mt_smmlar(x, m2, x);
    return (h + ((h >> 31) & mask) + half) >> r;
}

/*
 * The prepared forms of mt_requantize in the library's mode, as the forward DSP kernels use them:
 *     if (mt_requant_fast_ok(multiplier, shift)) {
 *         m = mt_requant_mult(multiplier); sh = mt_requant_sh(shift); c1 = mt_requant_c1(sh, zp);
 *         y = mt_requantize_fast(acc, m, sh, c1);   (mt_requantize_floor when zp == -128)
 *     }
 * equals mt_requantize(acc, multiplier, shift, zp, -128, 127). MT_ASM_REQUANT_FLOOR / _FAST are the
 * same two forms as instruction text for the kernels written in assembly: Y the result, T a
 * scratch register, A the accumulator (left intact), M, C1, SH the prepared constants.
 */
#if MT_ROUNDING_TFLITE
#define MT_REQUANT_PREP(single, tflite) tflite
#define MT_ASM_REQUANT_FLOOR(Y, T, A, M, C1, SH)                                                          \
    "smmlar " T ", " A ", " M ", " A "\n\t"                                                                   \
    "qadd   " Y ", " T ", " C1 "\n\t"                                                                         \
    "asr    " Y ", " Y ", " SH "\n\t"                                                                         \
    "ssat   " Y ", #8, " Y "\n\t"
#define MT_ASM_REQUANT_FAST(Y, T, A, M, C1, SH)                                                           \
    "smmlar " T ", " A ", " M ", " A "\n\t"                                                                   \
    "add    " T ", " T ", " T ", asr #31\n\t"                                                                 \
    "qadd   " Y ", " T ", " C1 "\n\t"                                                                         \
    "asr    " Y ", " Y ", " SH "\n\t"                                                                         \
    "ssat   " Y ", #8, " Y "\n\t"
#else /* !MT_ROUNDING_TFLITE */
#define MT_REQUANT_PREP(single, tflite) single
#define MT_ASM_REQUANT_FLOOR(Y, T, A, M, C1, SH)                                                          \
    "smmla " Y ", " A ", " M ", " C1 "\n\t"                                                                   \
    "asr   " Y ", " Y ", " SH "\n\t"                                                                          \
    "ssat  " Y ", #8, " Y "\n\t"
#define MT_ASM_REQUANT_FAST(Y, T, A, M, C1, SH)                                                           \
    "asr   " T ", " A ", #31\n\t"                                                                             \
    "add   " Y ", " C1 ", " T "\n\t"                                                                          \
    "smlal " T ", " Y ", " A ", " M "\n\t"                                                                    \
    "asr   " Y ", " Y ", " SH "\n\t"                                                                          \
    "ssat  " Y ", #8, " Y "\n\t"
#endif /* MT_ROUNDING_TFLITE */

/* 1 when the channel allows the prepared forms of the library's mode. */
MT_INLINE int mt_requant_fast_ok(int32_t multiplier, int32_t shift)
{
    return MT_REQUANT_PREP(mt_requant_fast_ok_single, mt_requant_fast_ok_tflite)(multiplier, shift);
}

/* The prepared multiplier: the multiplier itself ("single"), 2m as an int32 ("tflite"). */
MT_INLINE int32_t mt_requant_mult(int32_t multiplier)
{
    return MT_REQUANT_PREP(multiplier, mt_requant_mult_tflite(multiplier));
}

/* The prepared shift of a channel with mt_requant_fast_ok: -1 - shift ("single"), -shift ("tflite"). */
MT_INLINE int32_t mt_requant_sh(int32_t shift)
{
    return MT_REQUANT_PREP(-1 - shift, -shift);
}

/* The prepared general form in the library's mode; see above. */
MT_INLINE int32_t mt_requantize_fast(int32_t acc, int32_t m, int32_t sh, int32_t c1)
{
    return MT_REQUANT_PREP(mt_requantize_fast_single, mt_requantize_fast_tflite)(acc, m, sh, c1);
}

/* The prepared form for zero point -128 in the library's mode; see above. */
MT_INLINE int32_t mt_requantize_floor(int32_t acc, int32_t m, int32_t sh, int32_t c1)
{
    return MT_REQUANT_PREP(mt_requantize_floor_single, mt_requantize_floor_tflite)(acc, m, sh, c1);
}

#endif /* MT_DSP */

/* round_half_away(num / den) for den > 0 with C's truncating division (avgpool). */
MT_INLINE int32_t mt_rounding_divide_s32(int32_t num, int32_t den)
{
    return (num >= 0 ? num + den / 2 : num - den / 2) / den;
}

#endif /* MT_FIXEDPOINT_H */
