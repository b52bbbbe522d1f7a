/* uint8 linear error propagation, as mt_conv2d_bwd_in_u8 (Python twin: fqt_kernels.linear_bwd_in_acc). */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

mt_status mt_linear_bwd_in_u8(int32_t batch,
                              int32_t e_zero_point,
                              int32_t w_zero_point,
                              int32_t out_features,
                              const uint8_t *e,
                              const uint8_t *weight,
                              int32_t in_features,
                              float multiplier,
                              int32_t out_zero_point,
                              uint8_t *e_x,
                              int32_t *acc_min,
                              int32_t *acc_max)
{
    int32_t b, i, o;
    if (!e || !weight || !acc_min || !acc_max || batch < 1) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        for (i = 0; i < in_features; ++i) {
            int32_t acc = 0;
            for (o = 0; o < out_features; ++o) {
                acc += ((int32_t)e[b * out_features + o] - e_zero_point) *
                       ((int32_t)weight[o * in_features + i] - w_zero_point);
            }
            *acc_min = acc < *acc_min ? acc : *acc_min;
            *acc_max = acc > *acc_max ? acc : *acc_max;
            if (e_x) {
                e_x[b * in_features + i] = (uint8_t)mt_requant_f32_floor(acc, multiplier, out_zero_point, 0, 255);
            }
        }
    }
    return MT_OK;
}
