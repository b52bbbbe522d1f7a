/*
 * float32 linear forward, precision float32 (Python twins: fqt_kernels.linear_fwd_acc in mode
 * "f32seq" and act_f32): y[b, o] = act((sum over i in order from +0.0 of x[b, i] * w[o, i]) + b[o]).
 */
#include "mt_fqt.h"

mt_status mt_linear_fwd_f32(int32_t act,
                            int32_t batch,
                            const float *input,
                            int32_t in_features,
                            const float *weight,
                            const float *bias,
                            int32_t out_features,
                            float *output)
{
    int32_t b, o, i;
    if (!input || !weight || !bias || !output || batch < 1 || act < 0 || act > 2) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        const float *xb = input + b * in_features;
        for (o = 0; o < out_features; ++o) {
            const float *wr = weight + o * in_features;
            float acc = 0.0f, z;
            for (i = 0; i < in_features; ++i) {
                acc += xb[i] * wr[i];
            }
            z = acc + bias[o];
            if (act != 0) {
                z = z < 0.0f ? 0.0f : z;
                z = (act == 2 && z > 6.0f) ? 6.0f : z;
            }
            output[b * out_features + o] = z;
        }
    }
    return MT_OK;
}
