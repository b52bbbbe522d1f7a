/*
 * Linear gradients of one sample, precision mixed (Python twins: fqt_kernels.linear_bwd_w_acc and
 * bias_grad_acc, "f32seq"), accumulated in sample order: grad[o, i] += e[o] * float32(x[i] - z_x),
 * grad_bias[o] += e[o].
 */
#include "mt_fqt.h"

mt_status mt_linear_bwd_w_u8_f32(int32_t input_zero_point,
                                 const uint8_t *input,
                                 int32_t in_features,
                                 const float *e,
                                 int32_t out_features,
                                 float *grad,
                                 float *grad_bias)
{
    int32_t o, i;
    if (!input || !e || !grad || !grad_bias) {
        return MT_ERR_ARG;
    }
    for (o = 0; o < out_features; ++o) {
        const float eo = e[o];
        grad_bias[o] += eo;
        for (i = 0; i < in_features; ++i) {
            grad[o * in_features + i] += eo * (float)((int32_t)input[i] - input_zero_point);
        }
    }
    return MT_OK;
}
