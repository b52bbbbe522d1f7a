/*
 * Linear gradients of the kept rows of a partial update, precision float32 (Python twins:
 * fqt_kernels.linear_bwd_w_acc and bias_grad_acc, "f32seq"): kept rows written as +0.0 + e[o] * x[i]
 * (the dense kernel's sum into the zeroed buffer, batch 1); pruned rows are not written.
 */
#include "mt_fqt_keep.h"

mt_status mt_linear_bwd_w_f32_keep(const int32_t *keep,
                                   int32_t n_keep,
                                   const float *input,
                                   int32_t in_features,
                                   const float *e,
                                   float *grad,
                                   float *grad_bias)
{
    int32_t t, i;
    if (!keep || !input || !e || !grad || !grad_bias || n_keep < 0) {
        return MT_ERR_ARG;
    }
    for (t = 0; t < n_keep; ++t) {
        const int32_t o = keep[t];
        const float eo = e[o];
        grad_bias[o] = 0.0f + eo;
        for (i = 0; i < in_features; ++i) {
            grad[o * in_features + i] = 0.0f + eo * input[i];
        }
    }
    return MT_OK;
}
