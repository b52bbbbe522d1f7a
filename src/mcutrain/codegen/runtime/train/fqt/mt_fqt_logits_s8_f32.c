/*
 * float32 logits as the integer loss sees them (Python twin: fqt_backward.float_logits_s8):
 * one sample's logits quantized to int8 with the qparams of their range [lo, hi] (qparams_from_range) and
 * rounding half away from zero (QParams.quantize, "nearest"); a quotient that overflows saturates.
 */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

mt_status mt_fqt_logits_s8_f32(int32_t size, const float *logits, float lo, float hi, int8_t *q, float *scale,
                               int32_t *zero_point)
{
    float s, vlo, vhi;
    int32_t z, i;
    if (!logits || !q || !scale || !zero_point || size < 1) {
        return MT_ERR_ARG;
    }
    mt_fqt_qparams_s8(lo, hi, &s, &z);
    vlo = (float)(-128 - z);
    vhi = (float)(127 - z);
    for (i = 0; i < size; ++i) {
        float v = mt_round_half_away_inline_f32(logits[i] / s);
        v = v < vlo ? vlo : (v > vhi ? vhi : v);
        q[i] = (int8_t)((int32_t)v + z);
    }
    *scale = s;
    *zero_point = z;
    return MT_OK;
}
