/*
 * Linear error propagation of prescaled int16 errors (Python twin: fqt_kernels.linear_bwd_in_acc
 * in mode "int" and fqt.FQT._to_err). NOTE: |acc| <= 32512 * 127 * O < 2^31 for O <= 520 (checked
 * by the exporter).
 */
#include "mt_fixedpoint.h"
#include "mt_fqt.h"

mt_status mt_linear_bwd_in_s8_s16(int32_t batch,
                                  const int32_t *channels,
                                  int32_t n_channels,
                                  int32_t out_features,
                                  const int16_t *e16,
                                  const int8_t *weight,
                                  int32_t in_features,
                                  int32_t multiplier,
                                  int32_t shift,
                                  int8_t *e_x,
                                  int32_t *acc_min,
                                  int32_t *acc_max)
{
    int32_t b, i, o;
    if (!e16 || !weight || !acc_min || !acc_max || batch < 1) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        const int16_t *e = e16 + b * out_features;
        for (i = 0; i < in_features; ++i) {
            int32_t acc = 0;
            if (channels) {
                int32_t t;
                for (t = 0; t < n_channels; ++t) {
                    o = channels[t];
                    acc += (int32_t)e[o] * weight[o * in_features + i];
                }
            } else {
                for (o = 0; o < out_features; ++o) {
                    acc += (int32_t)e[o] * weight[o * in_features + i];
                }
            }
            *acc_min = acc < *acc_min ? acc : *acc_min;
            *acc_max = acc > *acc_max ? acc : *acc_max;
            if (e_x) {
                e_x[b * in_features + i] = mt_requantize(acc, multiplier, shift, 0, -127, 127);
            }
        }
    }
    return MT_OK;
}
