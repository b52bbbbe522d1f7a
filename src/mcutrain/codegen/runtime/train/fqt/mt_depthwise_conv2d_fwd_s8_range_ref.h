/*
 * The reference body of the depthwise conv forward with per-channel accumulator extremes, shared
 * with its DSP twin dsp/mt_depthwise_conv2d_fwd_s8_range.c (FQT; Python twin:
 * fqt_kernels.conv2d_fwd_acc with groups = C, the bias add and requantize_output, with
 * fqt._acc_range reading the extremes). Same arithmetic as the grouped loops of
 * mt_conv2d_fwd_s8_range, reordered for depthwise layers: per output position a block of
 * channels is accumulated tap by tap with the channels as the inner loop (contiguous inputs), so
 * no per-channel division or one-iteration loop remains.
 * NOTE: |acc| <= |b| + 255 * sum|w| < 2^31 (the bias room of fqt._bias_room), in any order.
 */
#ifndef MT_DEPTHWISE_CONV2D_FWD_S8_RANGE_REF_H
#define MT_DEPTHWISE_CONV2D_FWD_S8_RANGE_REF_H

#include "mt_fixedpoint.h"
#include "mt_fqt.h"

#define MT_DW_BLOCK 32 /* channels accumulated at once: 128 bytes of int32 on the stack */

MT_INLINE mt_status mt_depthwise_conv2d_fwd_s8_range_ref(const mt_context *ctx,
                                                          const mt_conv_params *params,
                                                          const mt_per_channel_quant *quant,
                                                          const mt_dims *input_dims,
                                                          const int8_t *input,
                                                          const mt_dims *filter_dims,
                                                          const int8_t *filter,
                                                          const int32_t *bias,
                                                          const mt_dims *output_dims,
                                                          int8_t *output,
                                                          int32_t *acc_min,
                                                          int32_t *acc_max)
{
    int32_t hi_, wi, c_n, kh, kw, kk, ho, wo, zx, b, y, x;
    (void)ctx; /* no scratch */
    if (!params || !quant || !input_dims || !input || !filter_dims || !filter || !bias || !output_dims ||
        !output || !acc_min || !acc_max) {
        return MT_ERR_ARG;
    }
    hi_ = input_dims->h;
    wi = input_dims->w;
    c_n = input_dims->c;
    kh = filter_dims->h;
    kw = filter_dims->w;
    kk = kh * kw;
    ho = output_dims->h;
    wo = output_dims->w;
    zx = params->input_zero_point;
    if (filter_dims->c != 1 || filter_dims->n != c_n || params->groups != c_n || output_dims->c != c_n) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                int8_t *out = output + ((b * ho + y) * wo + x) * c_n;
                int32_t c0;
                for (c0 = 0; c0 < c_n; c0 += MT_DW_BLOCK) {
                    const int32_t cb = c_n - c0 < MT_DW_BLOCK ? c_n - c0 : MT_DW_BLOCK;
                    int32_t acc[MT_DW_BLOCK];
                    int32_t i, j, c;
                    for (c = 0; c < cb; ++c) {
                        acc[c] = bias[c0 + c];
                    }
                    for (i = 0; i < kh; ++i) {
                        const int32_t iy = y * params->stride_h - params->pad_top + i;
                        if (iy < 0 || iy >= hi_) {
                            continue; /* padding: a centred 0 */
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t ix = x * params->stride_w - params->pad_left + j;
                            const int8_t *px;
                            const int8_t *pw;
                            if (ix < 0 || ix >= wi) {
                                continue;
                            }
                            px = input + ((b * hi_ + iy) * wi + ix) * c_n + c0;
                            pw = filter + c0 * kk + i * kw + j;
                            for (c = 0; c < cb; ++c) {
                                acc[c] += ((int32_t)px[c] - zx) * pw[c * kk];
                            }
                        }
                    }
                    for (c = 0; c < cb; ++c) {
                        const int32_t o = c0 + c;
                        const int32_t v = acc[c];
                        acc_min[o] = v < acc_min[o] ? v : acc_min[o];
                        acc_max[o] = v > acc_max[o] ? v : acc_max[o];
                        out[o] = mt_requantize(v, quant->multiplier[o], quant->shift[o], params->output_zero_point,
                                                              params->act_min, params->act_max);
                    }
                }
            }
        }
    }
    return MT_OK;
}

#endif /* MT_DEPTHWISE_CONV2D_FWD_S8_RANGE_REF_H */
