/*
 * One output row of the BP-QAS linear weight gradient, float32: row `channel` of
 * mt_linear_bwd_w_s8_f32 in the same order (sum over n in order from 0), bit for bit.
 */
#include "mt_qas_f32_args_ref.h"
#include "mt_train.h"

mt_status mt_linear_bwd_w_row_s8_f32(int32_t input_zero_point,
                                     int32_t batch,
                                     const int8_t *input,
                                     int32_t in_features,
                                     const float *e_acc,
                                     int32_t out_features,
                                     int32_t channel,
                                     float *grad_row)
{
    int32_t n;
    int32_t i;
    if (mt_linear_bwd_w_row_s8_f32_args(batch, input, in_features, e_acc, out_features, channel, grad_row) != MT_OK) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < in_features; ++i) {
        float acc = 0.0f;
        for (n = 0; n < batch; ++n) {
            const float p = (float)(input[(int64_t)n * in_features + i] - input_zero_point) *
                            e_acc[(int64_t)n * out_features + channel];
            acc = acc + p;
        }
        grad_row[i] = acc;
    }
    return MT_OK;
}
