/*
 * mcutrain runtime: internal helpers of the FQT kernels (not public API).
 */
#ifndef MT_FQT_MATH_H
#define MT_FQT_MATH_H

#include <stdint.h>
#include <string.h>

#include "mt_train_math.h"

/* float32(v) of an int32: exact below 2^24 in magnitude (no rounding involved), else mt_s64_to_f32. */
MT_INLINE float mt_s32_to_f32(int32_t v)
{
    if (v > -16777216 && v < 16777216) {
        return (float)v;
    }
    return mt_s64_to_f32(v);
}

/*
 * Seed A's float requantization (fqt_kernels.requant_f32_floor):
 * clamp(floor(float32(acc) * m) + float32(z), lo, hi), every step a float32 operation.
 * NOTE: a few FPU instructions, not a float library: for |p| < 2^22 (p = float32(acc) * m) floor(p)
 * is the truncating VCVT corrected by one compare, and floor(p) + z is exact in int32 as in float32
 * (|floor(p) + z| < 2^24); p <= -2^22 (or NaN) and p >= 2^22 lie beyond every clamp when
 * |z|, |lo|, |hi| < 2^21 (uint8 and int8 ranges), so they give lo and hi as the float32 steps do.
 */
MT_INLINE int32_t mt_requant_f32_floor(int32_t acc, float m, int32_t z, int32_t lo, int32_t hi)
{
    const float p = mt_s32_to_f32(acc) * m;
    int32_t v;
    if (!(p > -4194304.0f)) {
        return lo;
    }
    if (p >= 4194304.0f) {
        return hi;
    }
    v = (int32_t)p;
    v -= (float)v > p;
    v += z;
    if (v < lo) {
        return lo;
    }
    return v > hi ? hi : v;
}

/*
 * clamp(round_half_away(x), -z, 255 - z) + z for a zero point z in [0, 255], in integers after one
 * truncating conversion: with t2 = trunc(2x) (2x exact), round_half_away(x) =
 * trunc((t2 + sign) / 2), sign = +1 for t2 >= 0, else -1 (|x| + 1/2 floored is (|t2| + 1) / 2
 * floored). |2x| > 1024 (and NaN, which finite operands never produce) saturates first: every such
 * value clamps to the same bound, and the conversion stays defined. The byte clamp is one USAT.
 */
MT_INLINE uint8_t mt_round_clamp_u8(float x, int32_t z)
{
    const float x2 = x + x;
    uint32_t bits;
    int32_t t2, t;
    memcpy(&bits, &x2, 4);
    if ((bits & 0x7FFFFFFFu) > 0x44800000u) { /* |2x| > 1024.0f, or NaN */
        return (bits >> 31) ? 0u : 255u;
    }
    t2 = (int32_t)x2;
    t = (t2 + (t2 < 0 ? -1 : 1)) / 2 + z;
    return (uint8_t)(t < 0 ? 0 : (t > 255 ? 255 : t));
}

/* sqrt(x) of a float32 x >= 0, correctly rounded (what IEEE sqrtf gives), with integers only. */
MT_INLINE float mt_sqrt_f32(float x)
{
    uint32_t bits;
    uint64_t m;
    uint64_t q = 0;
    uint64_t bit = (uint64_t)1 << 46;
    int32_t e;
    if (!(x > 0.0f)) {
        return x; /* +0 (a variance is never negative) */
    }
    memcpy(&bits, &x, 4);
    if ((bits >> 23) == 0u) {
        m = bits & 0x7FFFFFu;
        e = -149;
    } else {
        m = (bits & 0x7FFFFFu) | 0x800000u;
        e = (int32_t)(bits >> 23) - 150; /* x = m * 2^e */
    }
    if (e & 1) {
        m <<= 1;
        --e;
    }
    while (m < ((uint64_t)1 << 46)) { /* m in [2^46, 2^48), e even: floor(sqrt(m)) in [2^23, 2^24) */
        m <<= 2;
        e -= 2;
    }
    while (bit > m) {
        bit >>= 2;
    }
    while (bit != 0u) { /* bit-by-bit integer square root: q = floor(sqrt(m)), m becomes m - q^2 */
        if (m >= q + bit) {
            m -= q + bit;
            q = (q >> 1) + bit;
        } else {
            q >>= 1;
        }
        bit >>= 2;
    }
    /* round to nearest: sqrt > q + 1/2 iff m - q^2 > q (an exact midpoint is impossible) */
    if (m > q) {
        ++q;
    }
    return (float)(uint32_t)q * mt_pow2_f32(e / 2);
}

/*
 * One channel of fqt._rescale_bias: b = clamp(round_half_away((float32(b) * s_old - step) / s_new),
 * +-room), room = max(2^31 - 1 - 255 * l1, 0) in float64 (l1 = sum |w - z_w| of the channel).
 */
MT_INLINE int32_t mt_fqt_rescale_bias_one(int32_t b, float s_old, float s_new, float step, int64_t l1)
{
    const float real = mt_s64_to_f32(b) * s_old - step;
    float q = real / s_new;
    double qd;
    double room = 2147483647.0 - 255.0 * (double)l1;
    room = room > 0.0 ? room : 0.0;
    if (q == q && q < 3.0e38f && q > -3.0e38f) {
        q = mt_round_half_away_inline_f32(q);
    }
    qd = (double)q;
    if (!(qd == qd)) {
        qd = 0.0; /* NaN cannot arise from finite operands; keep the bias defined */
    }
    qd = qd > room ? room : (qd < -room ? -room : qd);
    return (int32_t)qd;
}

#endif /* MT_FQT_MATH_H */
