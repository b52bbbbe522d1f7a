/*
 * The error of a tensor read by several ops (Python twin: fqt.FQTBackward._combine, uint8 errors):
 * per element, the parts' real values summed in float32 in arrival order, part k being
 * float32(e_k - zero_points[k]) * scales[k] (a uint8 error, scales[k] > 0) or a float32 real value
 * (scales[k] == 0: a transposed conv's float32(acc) * s_acc); then
 * e_out = clamp(floor(total / out_scale) + float32(z_out), 0, 255) (float32 division).
 * The extremes of the totals are written to *lo / *hi. With e_out NULL only the extremes are
 * computed (the range that fixes out_scale); the totals are recomputed, bit for bit, when e_out
 * is given. e_out may share storage with a part that starts at the same address (every element
 * is read before it is written).
 */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

mt_status mt_fqt_error_sum_u8(int32_t size,
                              int32_t n_parts,
                              const void *const *parts,
                              const float *scales,
                              const int32_t *zero_points,
                              float out_scale,
                              int32_t out_zero_point,
                              uint8_t *e_out,
                              float *lo,
                              float *hi)
{
    float mn = 0.0f, mx = 0.0f;
    int32_t i, k;
    if (!parts || !scales || !zero_points || !lo || !hi || size < 1 || n_parts < 1 ||
        (e_out && !(out_scale > 0.0f))) {
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
            const float v = scales[k] > 0.0f
                                ? (float)((int32_t)((const uint8_t *)parts[k])[i] - zero_points[k]) * scales[k]
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
            const float q = mt_floor_f32(total / out_scale) + (float)out_zero_point;
            e_out[i] = (uint8_t)(!(q >= 0.0f) ? 0 : (q > 255.0f ? 255 : (int32_t)q));
        }
    }
    *lo = mn;
    *hi = mx;
    return MT_OK;
}
