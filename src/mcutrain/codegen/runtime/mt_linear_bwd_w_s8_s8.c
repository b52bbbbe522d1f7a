/*
 * Linear weight and bias gradients from the kept int8 input and int8 errors, accumulated in int32
 * (Python twin: fqt_kernels.linear_bwd_w_acc and bias_grad_acc in mode "int").
 */
#include "mt_fqt.h"

mt_status mt_linear_bwd_w_s8_s8(int32_t input_zero_point,
                                int32_t batch,
                                const int8_t *input,
                                int32_t in_features,
                                const int8_t *e,
                                int32_t out_features,
                                int32_t *grad,
                                int32_t *grad_bias)
{
    int32_t b, o, i;
    if (!input || !e || !grad || !grad_bias || batch < 1) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        const int8_t *x = input + b * in_features;
        for (o = 0; o < out_features; ++o) {
            const int32_t eo = e[b * out_features + o];
            int32_t *g = grad + o * in_features;
            if (eo == 0) {
                continue; /* exact: a zero error adds nothing */
            }
            grad_bias[o] += eo;
            for (i = 0; i < in_features; ++i) {
                g[i] += eo * ((int32_t)x[i] - input_zero_point);
            }
        }
    }
    return MT_OK;
}
