/*
 * Linear error propagation of float32 errors with uint8 weights, precision mixed (Python twin:
 * fqt_kernels.linear_bwd_in_acc in mode "f32seq", then the product by s_w): per input i, the sum
 * over o in order from +0.0 of e[o] * float32(w[o, i] - z_w), times w_scale. Zero errors skipped
 * (finite weights: their products cannot change the sum).
 */
#include "mt_fqt.h"

mt_status mt_linear_bwd_in_u8_f32(int32_t batch,
                                  int32_t w_zero_point,
                                  float w_scale,
                                  int32_t out_features,
                                  const float *e,
                                  const uint8_t *weight,
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
                if (eb[o] != 0.0f) {
                    acc += eb[o] * (float)((int32_t)weight[o * in_features + i] - w_zero_point);
                }
            }
            e_x[b * in_features + i] = acc * w_scale;
        }
    }
    return MT_OK;
}
