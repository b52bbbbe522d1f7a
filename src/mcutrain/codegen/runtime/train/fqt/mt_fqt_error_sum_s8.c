/*
 * The error of a tensor read by several ops (Python twin: fqt.FQTBackward._combine, int8 errors):
 * per element, the parts' real values summed in float32 in arrival order, part k being
 * float32(e_k) * scales[k] (an int8 error of scale scales[k] > 0) or a float32 real value
 * (scales[k] == 0: a transposed conv's float32(acc) * s_acc); then
 * e_out = clamp(round_half_away(total / out_scale), -127, 127) (float32 division).
 * The extremes of the totals are written to *lo / *hi. With e_out NULL only the extremes are
 * computed (the range that fixes out_scale); the totals are recomputed, bit for bit, when
 * e_out is given. e_out may share storage with a part that starts at the same address (every
 * element is read before it is written).
 */
#include "mt_fqt.h"
#include "mt_train_math.h"

mt_status mt_fqt_error_sum_s8(int32_t size,
                              int32_t n_parts,
                              const void *const *parts,
                              const float *scales,
                              float out_scale,
                              int8_t *e_out,
                              float *lo,
                              float *hi)
{
    float mn = 0.0f, mx = 0.0f;
    int32_t i, k;
    if (!parts || !scales || !lo || !hi || size < 1 || n_parts < 1 || (e_out && !(out_scale > 0.0f))) {
        return MT_ERR_ARG;
    }
    for (k = 0; k < n_parts; ++k) {
        if (!parts[k] || scales[k] < 0.0f) {
            return MT_ERR_ARG;
        }
    }
    for (i = 0; i < size; ++i) {
        float total = 0.0f;
        for (k = 0; k < n_parts; ++k) {
            const float v = scales[k] > 0.0f ? (float)((const int8_t *)parts[k])[i] * scales[k]
                                             : ((const float *)parts[k])[i];
            total = k == 0 ? v : total + v;
        }
        if (i == 0 || total < mn) {
            mn = total;
        }
        if (i == 0 || total > mx) {
            mx = total;
        }
        if (e_out) {
            const float q = mt_round_half_away_inline_f32(total / out_scale);
            e_out[i] = (int8_t)(q > 127.0f ? 127 : (q < -127.0f ? -127 : (int32_t)q));
        }
    }
    *lo = mn;
    *hi = mx;
    return MT_OK;
}
