/*
 * Seed A's uint8 linear error propagation over the kept rows of a partial update, as
 * mt_conv2d_bwd_in_u8_keep (Python twin: fqt_kernels.linear_bwd_in_acc, pruned errors at z_e).
 */
#include "mt_fqt_keep.h"
#include "mt_fqt_math.h"

mt_status mt_linear_bwd_in_u8_keep(const int32_t *keep,
                                   int32_t n_keep,
                                   int32_t e_zero_point,
                                   int32_t w_zero_point,
                                   const uint8_t *e,
                                   const uint8_t *weight,
                                   int32_t in_features,
                                   float multiplier,
                                   int32_t out_zero_point,
                                   uint8_t *e_x,
                                   int32_t *acc_min,
                                   int32_t *acc_max)
{
    int32_t i, t;
    if (!keep || !e || !weight || !acc_min || !acc_max || n_keep < 0) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < in_features; ++i) {
        int32_t acc = 0;
        for (t = 0; t < n_keep; ++t) {
            const int32_t o = keep[t];
            acc += ((int32_t)e[o] - e_zero_point) * ((int32_t)weight[o * in_features + i] - w_zero_point);
        }
        *acc_min = acc < *acc_min ? acc : *acc_min;
        *acc_max = acc > *acc_max ? acc : *acc_max;
        if (e_x) {
            e_x[i] = (uint8_t)mt_requant_f32_floor(acc, multiplier, out_zero_point, 0, 255);
        }
    }
    return MT_OK;
}
