/*
 * Linear error propagation of float32 errors over the kept rows of a partial update, precision
 * float32 (Python twin: fqt_kernels.linear_bwd_in_acc, "f32seq", pruned errors +0.0): the order of
 * mt_linear_bwd_in_f32 with the kept rows only (exact, see mt_conv2d_bwd_in_f32_keep).
 */
#include "mt_fqt_keep.h"

mt_status mt_linear_bwd_in_f32_keep(const int32_t *keep,
                                    int32_t n_keep,
                                    const float *e,
                                    const float *weight,
                                    int32_t in_features,
                                    float *e_x)
{
    int32_t i, t;
    if (!keep || !e || !weight || !e_x || n_keep < 0) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < in_features; ++i) {
        float acc = 0.0f;
        for (t = 0; t < n_keep; ++t) {
            acc += e[keep[t]] * weight[keep[t] * in_features + i];
        }
        e_x[i] = acc;
    }
    return MT_OK;
}
