/*
 * The float32 error of a tensor read by several ops, precisions mixed and float32 (Python twin:
 * fqt.FQTBackward._combine on float32 errors): per element parts[0] + parts[1] + ... in arrival
 * order, each addition rounded to float32 (the first part as it is, not +0.0 + it). e_out may share
 * storage with parts[0] (every element is read before it is written).
 */
#include "mt_fqt.h"

mt_status mt_fqt_error_sum_f32(int32_t size, int32_t n_parts, const float *const *parts, float *e_out)
{
    int32_t i, k;
    if (!parts || !e_out || size < 1 || n_parts < 1) {
        return MT_ERR_ARG;
    }
    for (k = 0; k < n_parts; ++k) {
        if (!parts[k]) {
            return MT_ERR_ARG;
        }
    }
    for (i = 0; i < size; ++i) {
        float total = parts[0][i];
        for (k = 1; k < n_parts; ++k) {
            total += parts[k][i];
        }
        e_out[i] = total;
    }
    return MT_OK;
}
