/*
 * FQT dynamic ranges and the qparams derived from them (Python twins: quant.qparams.EmaRange,
 * qparams_from_range, quant.fixedpoint.activation_range, methods.fqt.pow2_symmetric_qparams and
 * fqt._acc_range). Every float32 operation is written in the Python order.
 */
#include <string.h>

#include "mt_fqt.h"
#include "mt_train_math.h"

void mt_fqt_range_see(mt_fqt_range *r, float lo, float hi)
{
    if (!r->seen) {
        r->step_lo = lo;
        r->step_hi = hi;
        r->seen = 1;
        return;
    }
    r->step_lo = lo < r->step_lo ? lo : r->step_lo;
    r->step_hi = hi > r->step_hi ? hi : r->step_hi;
}

void mt_fqt_range_seed(mt_fqt_range *r)
{
    if (r->initialized || !r->seen) {
        return;
    }
    r->lo = r->step_lo;
    r->hi = r->step_hi;
    r->initialized = 1;
    r->fresh = 1;
}

void mt_fqt_range_update(mt_fqt_range *r, float alpha)
{
    if (r->seen && !r->fresh) {
        if (!r->initialized) {
            r->lo = r->step_lo;
            r->hi = r->step_hi;
            r->initialized = 1;
        } else {
            const float keep = 1.0f - alpha;
            r->lo = keep * r->lo + alpha * r->step_lo;
            r->hi = keep * r->hi + alpha * r->step_hi;
        }
    }
    r->fresh = 0;
    r->seen = 0;
}

void mt_fqt_qparams_s8(float lo, float hi, float *scale, int32_t *zero_point)
{
    const float lo32 = lo < 0.0f ? lo : 0.0f;
    const float hi32 = hi > 0.0f ? hi : 0.0f;
    const float width = hi32 - lo32;
    float s = width / 255.0f;
    float z;
    if (width == 0.0f) {
        s = 1.0f;
    } else if (s < mt_pow2_f32(-126)) {
        s = mt_pow2_f32(-126);
    }
    z = mt_round_half_away_inline_f32(-128.0f - lo32 / s);
    z = z < -128.0f ? -128.0f : (z > 127.0f ? 127.0f : z);
    *scale = s;
    *zero_point = (int32_t)z;
}

/*
 * ReLU6's clip in quantized steps of both precisions: round_half_away(6 / scale) in float64, clamped
 * to 1024 (only min(qmax, z + it) matters, and the clamp keeps the int32 conversion defined).
 */
MT_INLINE int32_t relu6_steps(float scale)
{
    const double q = 6.0 / (double)scale;
    const double t = q > 1024.0 ? 1024.0 : q;
    int32_t six = (int32_t)t;
    if (t - (double)six >= 0.5) {
        ++six;
    }
    return six;
}

void mt_fqt_act_range_s8(float scale, int32_t zero_point, int32_t act, int32_t *act_min, int32_t *act_max)
{
    *act_min = act == 0 ? -128 : (zero_point > -128 ? zero_point : -128);
    *act_max = 127;
    if (act == 2) {
        const int32_t six = relu6_steps(scale);
        if (zero_point + six < 127) {
            *act_max = zero_point + six;
        }
    }
}

int32_t mt_fqt_err_exp(float lo, float hi)
{
    float amax = -lo > hi ? -lo : hi;
    uint32_t bits;
    int32_t x;
    uint32_t mant;
    int32_t e;
    if (!(amax > 0.0f)) {
        return -24;
    }
    memcpy(&bits, &amax, 4);
    if ((bits >> 23) == 0u) { /* subnormal: normalise the 24-bit fraction by hand */
        mant = bits & 0x7FFFFFu;
        x = -125;
        while (mant < 0x800000u) {
            mant <<= 1;
            --x;
        }
    } else {
        mant = (bits & 0x7FFFFFu) | 0x800000u;
        x = (int32_t)(bits >> 23) - 126; /* amax = (mant / 2^24) * 2^x, mant / 2^24 in [0.5, 1) */
    }
    e = mant <= 127u * 131072u ? x - 7 : x - 6; /* f <= 127/128 */
    return e < -126 ? -126 : e;
}

void mt_fqt_acc_range_f32(int32_t channels, const int32_t *acc_min, const int32_t *acc_max, float s_x,
                          const float *s_w, int32_t act, mt_fqt_range *r)
{
    float lo = 0.0f;
    float hi = 0.0f;
    int32_t c;
    for (c = 0; c < channels; ++c) {
        const float s = s_x * s_w[c];
        const float a = mt_s64_to_f32(acc_min[c]) * s;
        const float b = mt_s64_to_f32(acc_max[c]) * s;
        if (c == 0 || a < lo) {
            lo = a;
        }
        if (c == 0 || b > hi) {
            hi = b;
        }
    }
    if (act != 0) {
        lo = lo > 0.0f ? lo : 0.0f;
        hi = hi > 0.0f ? hi : 0.0f;
    }
    if (act == 2) {
        lo = lo < 6.0f ? lo : 6.0f;
        hi = hi < 6.0f ? hi : 6.0f;
    }
    mt_fqt_range_see(r, lo, hi);
}

void mt_fqt_range_see_acc(mt_fqt_range *r, int32_t acc_min, int32_t acc_max, float scale)
{
    mt_fqt_range_see(r, mt_s64_to_f32(acc_min) * scale, mt_s64_to_f32(acc_max) * scale);
}

float mt_fqt_err_scale(const mt_fqt_range *r)
{
    return mt_pow2_f32(mt_fqt_err_exp(r->lo, r->hi));
}

void mt_fqt_qparams_u8(float lo, float hi, float *scale, int32_t *zero_point)
{
    const float lo32 = lo < 0.0f ? lo : 0.0f;
    const float hi32 = hi > 0.0f ? hi : 0.0f;
    const float width = hi32 - lo32;
    float s = width / 255.0f;
    float z;
    if (width == 0.0f) {
        s = 1.0f;
    } else if (s < mt_pow2_f32(-126)) {
        s = mt_pow2_f32(-126);
    }
    z = mt_floor_f32(-lo32 / s);
    z = z < 0.0f ? 0.0f : (z > 255.0f ? 255.0f : z);
    *scale = s;
    *zero_point = (int32_t)z;
}

void mt_fqt_act_range_u8(float scale, int32_t zero_point, int32_t act, int32_t *act_min, int32_t *act_max)
{
    *act_min = act == 0 ? 0 : (zero_point > 0 ? zero_point : 0);
    *act_max = 255;
    if (act == 2) {
        const int32_t six = relu6_steps(scale);
        if (zero_point + six < 255) {
            *act_max = zero_point + six;
        }
    }
}
