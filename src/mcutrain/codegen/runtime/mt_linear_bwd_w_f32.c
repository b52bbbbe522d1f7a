/*
 * Linear gradients of one sample, precision float32 (Python twins: fqt_kernels.linear_bwd_w_acc and
 * bias_grad_acc, "f32seq"), accumulated in sample order: grad[o, i] += e[o] * x[i], grad_bias[o] += e[o].
 */
#include "mt_fqt.h"

mt_status mt_linear_bwd_w_f32(const float *input,
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
            grad[o * in_features + i] += eo * input[i];
        }
    }
    return MT_OK;
}
