/*
 * The plain loops of mt_conv2d_fwd_s8_range (train/fqt/mt_conv2d_fwd_s8_range.c), always inline:
 * the reference runs them for every conv it has no scratch column for (and every grouped conv),
 * and the ARMv6-M twin (m0/mt_conv2d_fwd_s8_range.c) for the grouped convs, so both builds share
 * one definition of the result. Padding holds real 0 (a centred 0): out-of-bounds taps are skipped.
 * NOTE: |acc| <= |b| + 255 * sum|w| < 2^31 (the exporter bounds the bias by the same room).
 */
#ifndef MT_CONV2D_FWD_S8_RANGE_REF_H
#define MT_CONV2D_FWD_S8_RANGE_REF_H

#include "mt_fixedpoint.h"
#include "mt_fqt.h"

/* Arguments as mt_conv2d_fwd_s8_range (checked by the caller); any groups. */
MT_INLINE void mt_conv2d_fwd_s8_range_ref(const mt_conv_params *params,
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
    const int32_t hi_ = input_dims->h, wi = input_dims->w, ci = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w, cig = filter_dims->c;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t opg = o_n / params->groups;
    const int32_t zx = params->input_zero_point;
    int32_t b, y, x, o;
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                int8_t *out = output + ((b * ho + y) * wo + x) * o_n;
                for (o = 0; o < o_n; ++o) {
                    const int32_t g = o / opg;
                    const int8_t *wrow = filter + o * kh * kw * cig;
                    int32_t acc = bias[o];
                    int32_t i, j, c;
                    for (i = 0; i < kh; ++i) {
                        const int32_t iy = y * params->stride_h - params->pad_top + i;
                        if (iy < 0 || iy >= hi_) {
                            continue;
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t ix = x * params->stride_w - params->pad_left + j;
                            const int8_t *px;
                            const int8_t *pw;
                            if (ix < 0 || ix >= wi) {
                                continue;
                            }
                            px = input + ((b * hi_ + iy) * wi + ix) * ci + g * cig;
                            pw = wrow + (i * kw + j) * cig;
                            for (c = 0; c < cig; ++c) {
                                acc += ((int32_t)px[c] - zx) * pw[c];
                            }
                        }
                    }
                    acc_min[o] = acc < acc_min[o] ? acc : acc_min[o];
                    acc_max[o] = acc > acc_max[o] ? acc : acc_max[o];
                    out[o] = mt_requantize(acc, quant->multiplier[o], quant->shift[o], params->output_zero_point,
                                           params->act_min, params->act_max);
                }
            }
        }
    }
}

#endif /* MT_CONV2D_FWD_S8_RANGE_REF_H */
