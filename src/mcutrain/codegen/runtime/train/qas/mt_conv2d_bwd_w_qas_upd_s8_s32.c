/*
 * ZO node-perturbation recovery fused with the QAS update, one output channel at a time: the
 * exact int64 local gradient of every weight of `channel` (as mt_conv2d_bwd_w_s8_s32) and of its
 * bias, each applied at once with the update of mt_qas_upd_s8_s64 / mt_qas_upd_s32_s64. No
 * gradient buffer: one int64 sum lives in a register (the planner's fused `bwd_w_qas_update`).
 * Integer sums are exact in any order, so the result equals the unfused kernels bit for bit; the
 * sums read the layer's input, never its weights, so updating in place is safe.
 */
#include "mt_train.h"
#include "mt_train_math.h"

mt_status mt_conv2d_bwd_w_qas_upd_s8_s32(const mt_conv_params *params,
                                         const mt_dims *input_dims,
                                         const int8_t *input,
                                         const mt_dims *output_dims,
                                         const int32_t *g,
                                         const mt_dims *filter_dims,
                                         int32_t channel,
                                         float k_w,
                                         float k_b,
                                         uint32_t *round_state,
                                         int32_t max_step,
                                         int8_t *weight,
                                         int32_t *bias)
{
    int32_t ky;
    int32_t kx;
    int32_t i;
    int32_t n;
    int32_t oy;
    int32_t ox;
    int32_t cg;
    int32_t cin;
    int64_t sb = 0;
    int8_t *row;
    if (params == NULL || input_dims == NULL || input == NULL || output_dims == NULL || g == NULL ||
        filter_dims == NULL || weight == NULL || bias == NULL || params->groups < 1 || params->stride_h < 1 ||
        params->stride_w < 1 || input_dims->c % params->groups != 0 || filter_dims->n % params->groups != 0 ||
        filter_dims->c != input_dims->c / params->groups || output_dims->c != filter_dims->n ||
        output_dims->n != input_dims->n || channel < 0 || channel >= filter_dims->n || max_step < 1) {
        return MT_ERR_ARG;
    }
    cg = filter_dims->c;
    cin = (channel / (filter_dims->n / params->groups)) * cg;
    row = weight + (int64_t)channel * filter_dims->h * filter_dims->w * cg;
    for (ky = 0; ky < filter_dims->h; ++ky) {
        for (kx = 0; kx < filter_dims->w; ++kx) {
            for (i = 0; i < cg; ++i) {
                int64_t s = 0;
                for (n = 0; n < output_dims->n; ++n) {
                    for (oy = 0; oy < output_dims->h; ++oy) {
                        const int32_t y = oy * params->stride_h - params->pad_top + ky;
                        if (y < 0 || y >= input_dims->h) {
                            continue; /* padding: x - z_x = 0 */
                        }
                        for (ox = 0; ox < output_dims->w; ++ox) {
                            const int32_t x = ox * params->stride_w - params->pad_left + kx;
                            if (x < 0 || x >= input_dims->w) {
                                continue;
                            }
                            /* |x - z_x| <= 255, |g| < 2^31: each product < 2^39, fewer than 2^24 of them */
                            s += (int64_t)(input[(((int64_t)n * input_dims->h + y) * input_dims->w + x) *
                                                     input_dims->c + cin + i] - params->input_zero_point) *
                                 g[(((int64_t)n * output_dims->h + oy) * output_dims->w + ox) * output_dims->c +
                                   channel];
                        }
                    }
                }
                {
                    int8_t *w = row + ((int64_t)ky * filter_dims->w + kx) * cg + i;
                    const float delta = mt_s64_to_f32(s) * k_w;
                    /* stochastic rounding: one draw per weight, in the row's index order */
                    const int32_t step = round_state == NULL ? mt_qas_step_f32(delta) :
                                         mt_qas_step_sr_f32(delta, mt_xorshift32_uniform01(round_state));
                    *w = mt_qas_apply_s8(*w, mt_qas_step_limit_s32(step, max_step));
                }
            }
        }
    }
    for (n = 0; n < output_dims->n * output_dims->h * output_dims->w; ++n) {
        sb += g[(int64_t)n * output_dims->c + channel];
    }
    bias[channel] = mt_qas_apply_s32(bias[channel], mt_qas_step_f32(mt_s64_to_f32(sb) * k_b));
    return MT_OK;
}
