/*
 * mcutrain runtime: mt_conv2d_bwd_w_row_s8_f32, the ARMv6-M (Cortex-M0+) twin of
 * train/qas/mt_conv2d_bwd_w_row_s8_f32.c, bit-exact with it in every case: the same sums in the
 * same order (per sample n, t over the positions (oy, ox) row-major from +0.0, padding skipped;
 * then acc = acc + t over n), each step `t + (float)(x - z_x) * e` done in integers by
 * mt_m0_f32_run (mt_m0_f32.h) instead of three soft-float calls, the padding skipped by the range of
 * valid ox per tap instead of a test per position, and 32-bit addressing (no __muldi3).
 */
#include "mt_m0_f32.h"
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
            const int32_t sw = params->stride_w;
            const int32_t xstep = sw * input_dims->c;
            const int32_t ostep = output_dims->c;
            int32_t lo = 0;
            int32_t hi = output_dims->w;
            while (lo < hi && lo * sw - params->pad_left + kx < 0) {
                ++lo;
            }
            while (hi > lo && (hi - 1) * sw - params->pad_left + kx >= input_dims->w) {
                --hi;
            }
            for (i = 0; i < cg; ++i) {
                mt_m0_f32 acc = {0u, MT_M0_F32_ZERO, 0u};
                int32_t n;
                for (n = 0; n < output_dims->n; ++n) {
                    mt_m0_f32 t = {0u, MT_M0_F32_ZERO, 0u};
                    int32_t oy;
                    for (oy = 0; oy < output_dims->h; ++oy) {
                        const int32_t y = oy * params->stride_h - params->pad_top + ky;
                        if (y < 0 || y >= input_dims->h) {
                            continue;
                        }
                        mt_m0_f32_run(&t, e_acc + ((n * output_dims->h + oy) * output_dims->w + lo) * ostep + channel,
                                      ostep,
                                      input + ((n * input_dims->h + y) * input_dims->w + lo * sw - params->pad_left + kx) *
                                                  input_dims->c + cin + i,
                                      xstep, params->input_zero_point, hi - lo);
                    }
                    mt_m0_f32_add(&acc, &t);
                }
                grad_row[(ky * filter_dims->w + kx) * cg + i] = mt_m0_f32_float(mt_m0_f32_pack(&acc));
            }
        }
    }
    return MT_OK;
}
