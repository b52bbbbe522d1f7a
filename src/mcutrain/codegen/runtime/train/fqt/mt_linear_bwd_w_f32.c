/*
 * Linear gradients of one sample, precision float32 (Python twins: fqt_kernels.linear_bwd_w_acc and
 * bias_grad_acc, "f32seq"), accumulated in sample order: grad[o, i] += e[o] * x[i], grad_bias[o] += e[o].
 *
 * mt_linear_bwd_w_f32_keep (partial updates) writes the kept rows only, as +0.0 + e[o] * x[i] (the
 * dense kernel's sum into the zeroed buffer, batch 1); pruned rows are not written.
 */
#include "mt_arch.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"

/* Both kernels: rows keep[0..n) (keep NULL: 0..n), added to grad (add) or to +0.0. */
MT_INLINE void lin_bwd_w_f32(const int32_t *keep, int32_t n, int add, const float *input, int32_t in_features,
                             const float *e, float *grad, float *grad_bias)
{
    int32_t t, i;
    for (t = 0; t < n; ++t) {
        const int32_t o = keep ? keep[t] : t;
        const float eo = e[o];
        grad_bias[o] = (add ? grad_bias[o] : 0.0f) + eo;
        for (i = 0; i < in_features; ++i) {
            grad[o * in_features + i] = (add ? grad[o * in_features + i] : 0.0f) + eo * input[i];
        }
    }
}

mt_status mt_linear_bwd_w_f32(const float *input,
                              int32_t in_features,
                              const float *e,
                              int32_t out_features,
                              float *grad,
                              float *grad_bias)
{
    if (!input || !e || !grad || !grad_bias) {
        return MT_ERR_ARG;
    }
    lin_bwd_w_f32(NULL, out_features, 1, input, in_features, e, grad, grad_bias);
    return MT_OK;
}

mt_status mt_linear_bwd_w_f32_keep(const int32_t *keep,
                                   int32_t n_keep,
                                   const float *input,
                                   int32_t in_features,
                                   const float *e,
                                   float *grad,
                                   float *grad_bias)
{
    if (!keep || !input || !e || !grad || !grad_bias || n_keep < 0) {
        return MT_ERR_ARG;
    }
    lin_bwd_w_f32(keep, n_keep, 0, input, in_features, e, grad, grad_bias);
    return MT_OK;
}
