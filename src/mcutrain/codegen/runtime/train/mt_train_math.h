/*
 * mcutrain runtime: internal numeric helpers of the training kernels (not public API).
 *
 * Everything here is exact and independent of the C library: no libm call, no reliance on how a
 * compiler or libgcc rounds a 64-bit integer to float (docs/integer-semantics.md sections 1, 4
 * and 12.5 fix that rounding to nearest even, which these helpers implement with integers).
 */
#ifndef MT_TRAIN_MATH_H
#define MT_TRAIN_MATH_H

#include <stdint.h>
#include <string.h>

#include "mt_arch.h"

/* 2^e as float32 for e in [-126, 127] (built from its bits: exact, no libm). */
MT_INLINE float mt_pow2_f32(int32_t e)
{
    const uint32_t bits = (uint32_t)(e + 127) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/*
 * float32(v) rounded to nearest, ties to even, for any int64 v (numpy's int64 -> float32 cast).
 * NOTE: |v| < 2^24 converts exactly through int32; above, the top 24 bits are rounded by hand
 * (sticky remainder compared with half) and scaled by an exact power of two.
 */
MT_INLINE float mt_s64_to_f32(int64_t v)
{
    const uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    uint64_t q;
    uint64_t rem;
    uint64_t half;
    int32_t sh = 0;
    float f;
    if (mag < ((uint64_t)1 << 24)) {
        f = (float)(int32_t)mag;
        return v < 0 ? -f : f;
    }
    while ((mag >> sh) >= ((uint64_t)1 << 24)) {
        ++sh;
    }
    q = mag >> sh;
    rem = mag - (q << sh);
    half = (uint64_t)1 << (sh - 1);
    if (rem > half || (rem == half && (q & 1u))) {
        ++q; /* may reach 2^24: still exact in float32 */
    }
    f = (float)(int32_t)q * mt_pow2_f32(sh);
    return v < 0 ? -f : f;
}

/* trunc(x) for a float32: |x| >= 2^23 is already integral. NaN and +-inf come back unchanged
 * instead of reaching the int cast, which is undefined behaviour for them (float-cast-overflow). */
MT_INLINE float mt_trunc_f32(float x)
{
    if (!(x > -8388608.0f && x < 8388608.0f)) {
        return x;
    }
    return (float)(int32_t)x;
}

/* floor(x) for a finite float32. */
MT_INLINE float mt_floor_f32(float x)
{
    const float t = mt_trunc_f32(x);
    return t > x ? t - 1.0f : t;
}

/*
 * round_half_away(x) for a finite float32 (C99 roundf): x - trunc(x) is exact in IEEE
 * arithmetic, so comparing it with 0.5 decides ties without the error of floor(x + 0.5).
 */
MT_INLINE float mt_round_half_away_inline_f32(float x)
{
    const float t = mt_trunc_f32(x);
    const float frac = x - t;
    if (frac >= 0.5f) {
        return t + 1.0f;
    }
    if (frac <= -0.5f) {
        return t - 1.0f;
    }
    return t;
}

/*
 * The integer step of a QAS update: round_half_away(clamp(delta, -2^30, 2^30)) as int32
 * (docs/integer-semantics.md 12.5). NaN maps to 0 (it cannot arise from finite operands).
 */
MT_INLINE int32_t mt_qas_step_f32(float delta)
{
    const float limit = 1073741824.0f; /* 2^30 */
    if (delta > limit) {
        delta = limit;
    } else if (delta < -limit) {
        delta = -limit;
    } else if (!(delta == delta)) {
        return 0;
    }
    return (int32_t)mt_round_half_away_inline_f32(delta);
}

/*
 * The integer step of a QAS update by stochastic rounding (--update-rounding stochastic):
 * floor(clamp(delta, -2^30, 2^30) + r) in float32, r in [0, 1) one mt_xorshift32_uniform01 draw
 * (docs/integer-semantics.md 12.5). NaN maps to 0, as in mt_qas_step_f32.
 */
MT_INLINE int32_t mt_qas_step_sr_f32(float delta, float r)
{
    const float limit = 1073741824.0f; /* 2^30 */
    if (delta > limit) {
        delta = limit;
    } else if (delta < -limit) {
        delta = -limit;
    } else if (!(delta == delta)) {
        return 0;
    }
    return (int32_t)mt_floor_f32(delta + r); /* |delta + r| <= 2^30 + 1: fits int32 */
}

/* clamp(w - step, -127, 127): the int8 weight range of a trained tensor. */
MT_INLINE int8_t mt_qas_apply_s8(int8_t w, int32_t step)
{
    int64_t v = (int64_t)w - step;
    if (v < -127) {
        v = -127;
    }
    if (v > 127) {
        v = 127;
    }
    return (int8_t)v;
}

/*
 * A ZO weight step limited to +-max_step int8 steps (docs/integer-semantics.md 12.5, `--max-step`):
 * max_step >= 254 changes nothing (a larger step saturates the int8 weight the same way).
 */
MT_INLINE int32_t mt_qas_step_limit_s32(int32_t step, int32_t max_step)
{
    if (step > max_step) {
        return max_step;
    }
    if (step < -max_step) {
        return -max_step;
    }
    return step;
}

/* sat_int32(b - step). */
MT_INLINE int32_t mt_qas_apply_s32(int32_t b, int32_t step)
{
    int64_t v = (int64_t)b - step;
    if (v < INT32_MIN) {
        v = INT32_MIN;
    }
    if (v > INT32_MAX) {
        v = INT32_MAX;
    }
    return (int32_t)v;
}

#endif /* MT_TRAIN_MATH_H */
