/*
 * ZO node-perturbation recovery of a linear layer fused with the QAS update, one output row at a
 * time (see mt_conv2d_bwd_w_qas_upd_s8_s32): exact int64 sums, applied as soon as each is done.
 */
#include "mt_train.h"
#include "mt_train_math.h"

mt_status mt_linear_bwd_w_qas_upd_s8_s32(int32_t input_zero_point,
                                         int32_t batch,
                                         const int8_t *input,
                                         int32_t in_features,
                                         const int32_t *g,
                                         int32_t out_features,
                                         int32_t channel,
                                         float k_w,
                                         float k_b,
                                         uint32_t *round_state,
                                         int32_t max_step,
                                         int8_t *weight,
                                         int32_t *bias)
{
    int32_t n;
    int32_t i;
    int64_t sb = 0;
    int8_t *row;
    if (input == NULL || g == NULL || weight == NULL || bias == NULL || batch < 1 || in_features < 1 ||
        out_features < 1 || channel < 0 || channel >= out_features || max_step < 1) {
        return MT_ERR_ARG;
    }
    row = weight + (int64_t)channel * in_features;
    for (i = 0; i < in_features; ++i) {
        int64_t s = 0;
        for (n = 0; n < batch; ++n) {
            /* |x - z_x| <= 255, |g| < 2^31 */
            s += (int64_t)(input[(int64_t)n * in_features + i] - input_zero_point) *
                 g[(int64_t)n * out_features + channel];
        }
        {
            const float delta = mt_s64_to_f32(s) * k_w;
            /* stochastic rounding: one draw per weight, in index order */
            const int32_t step = round_state == NULL ? mt_qas_step_f32(delta) :
                                 mt_qas_step_sr_f32(delta, mt_xorshift32_uniform01(round_state));
            row[i] = mt_qas_apply_s8(row[i], mt_qas_step_limit_s32(step, max_step));
        }
    }
    for (n = 0; n < batch; ++n) {
        sb += g[(int64_t)n * out_features + channel];
    }
    bias[channel] = mt_qas_apply_s32(bias[channel], mt_qas_step_f32(mt_s64_to_f32(sb) * k_b));
    return MT_OK;
}
