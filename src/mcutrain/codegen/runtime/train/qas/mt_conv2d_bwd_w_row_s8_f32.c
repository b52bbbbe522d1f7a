/*
 * One output channel of the BP-QAS conv2d weight gradient, float32: the row `channel` of
 * mt_conv2d_bwd_w_s8_f32, in the same order (per sample n, the products over positions (oy, ox) in
 * row-major order, each rounded then added to a running sum t from 0, padding skipped; then
 * acc = acc + t over the samples in order from 0), so a row equals that kernel's row and the
 * simulator's (ste_kernels.conv2d_bwd_w_s8_f32) bit for bit, and so does the momentum velocity.
 * A generated train_step applies each row's update as soon as it is complete, so only one row of
 * gradient is ever stored (the planner's `grad:<layer>.row`).
 */
#include "mt_qas_f32_args_ref.h"
#include "mt_train.h"

mt_status mt_conv2d_bwd_w_row_s8_f32(const mt_conv_params *params,
                                     const mt_dims *input_dims,
                                     const int8_t *input,
                                     const mt_dims *output_dims,
                                     const float *e_acc,
                                     const mt_dims *filter_dims,
                                     int32_t channel,
                                     float *grad_row)
{
    int32_t ky;
    int32_t kx;
    int32_t i;
    int32_t cg;
    int32_t cin;
    if (mt_conv2d_bwd_w_row_s8_f32_args(params, input_dims, input, output_dims, e_acc, filter_dims, channel,
                                         grad_row) != MT_OK) {
        return MT_ERR_ARG;
    }
    cg = filter_dims->c;
    cin = (channel / (filter_dims->n / params->groups)) * cg;
    for (ky = 0; ky < filter_dims->h; ++ky) {
        for (kx = 0; kx < filter_dims->w; ++kx) {
            for (i = 0; i < cg; ++i) {
                float acc = 0.0f;
                int32_t n;
                for (n = 0; n < output_dims->n; ++n) {
                    float t = 0.0f;
                    int32_t oy;
                    for (oy = 0; oy < output_dims->h; ++oy) {
                        const int32_t y = oy * params->stride_h - params->pad_top + ky;
                        int32_t ox;
                        if (y < 0 || y >= input_dims->h) {
                            continue;
                        }
                        for (ox = 0; ox < output_dims->w; ++ox) {
                            const int32_t x = ox * params->stride_w - params->pad_left + kx;
                            int32_t xv;
                            float p;
                            if (x < 0 || x >= input_dims->w) {
                                continue;
                            }
                            xv = input[(((int64_t)n * input_dims->h + y) * input_dims->w + x) * input_dims->c +
                                       cin + i] - params->input_zero_point;
                            p = (float)xv * e_acc[(((int64_t)n * output_dims->h + oy) * output_dims->w + ox) *
                                                      output_dims->c + channel];
                            t = t + p;
                        }
                    }
                    acc = acc + t;
                }
                grad_row[((int64_t)ky * filter_dims->w + kx) * cg + i] = acc;
            }
        }
    }
    return MT_OK;
}
