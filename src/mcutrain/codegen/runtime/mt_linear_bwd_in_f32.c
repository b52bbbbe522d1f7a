/* Linear error propagation, precision float32 (Python twin: fqt_kernels.linear_bwd_in_acc, "f32seq"):
   e_x[b, i] = sum over o in order from +0.0 of e[b, o] * w[o, i]. */
#include "mt_fqt.h"

mt_status mt_linear_bwd_in_f32(int32_t batch,
                               int32_t out_features,
                               const float *e,
                               const float *weight,
                               int32_t in_features,
                               float *e_x)
{
    int32_t b, i, o;
    if (!e || !weight || !e_x || batch < 1) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        const float *eb = e + b * out_features;
        for (i = 0; i < in_features; ++i) {
            float acc = 0.0f;
            for (o = 0; o < out_features; ++o) {
                acc += eb[o] * weight[o * in_features + i];
            }
            e_x[b * in_features + i] = acc;
        }
    }
    return MT_OK;
}
