/*
 * mcutrain runtime: the reference body of mt_depthwise_conv2d_fwd_s8 (see mt_nn.h), shared with its
 * DSP twin dsp/mt_depthwise_conv2d_fwd_s8.c (which runs it for the layers it does not take).
 *
 * Output channel o reads input channel o / m (m = O / C, the channel multiplier). The taps are
 * summed in (ky, kx) order like the Python twin; with no overflow possible (bound checked at
 * export) the order does not matter anyway. One plain loop serves every core: depthwise layers
 * do few MACs per weight, so memory traffic, not arithmetic, bounds them.
 */
#ifndef MT_DEPTHWISE_CONV2D_FWD_S8_REF_H
#define MT_DEPTHWISE_CONV2D_FWD_S8_REF_H

#include "mt_fixedpoint.h"
#include "mt_nn.h"

MT_INLINE mt_status mt_depthwise_conv2d_fwd_s8_check(const mt_conv_params *p,
                                                     const mt_per_channel_quant *quant,
                                                     const mt_dims *in_d,
                                                     const int8_t *input,
                                                     const mt_dims *f_d,
                                                     const int8_t *filter,
                                                     const int32_t *bias,
                                                     const mt_dims *out_d,
                                                     const int8_t *output)
{
    if (!p || !quant || !quant->multiplier || !quant->shift || !in_d || !input || !f_d || !filter || !bias ||
        !out_d || !output) {
        return MT_ERR_ARG;
    }
    if (f_d->c != 1 || p->groups != in_d->c || f_d->n % in_d->c != 0 || out_d->c != f_d->n ||
        out_d->n != in_d->n || p->stride_h < 1 || p->stride_w < 1 || p->pad_top < 0 || p->pad_left < 0) {
        return MT_ERR_ARG;
    }
    return MT_OK;
}

/* The reference loop over arguments mt_depthwise_conv2d_fwd_s8_check accepted. */
MT_INLINE void mt_depthwise_conv2d_fwd_s8_ref(const mt_conv_params *params,
                                             const mt_per_channel_quant *quant,
                                             const mt_dims *input_dims,
                                             const int8_t *input,
                                             const mt_dims *filter_dims,
                                             const int8_t *filter,
                                             const int32_t *bias,
                                             const mt_dims *output_dims,
                                             int8_t *output)
{
    const mt_conv_params *p = params;
    const mt_dims *in_d = input_dims;
    const mt_dims *f_d = filter_dims;
    const mt_dims *out_d = output_dims;
    int32_t m, n, oy, ox, o;
    m = f_d->n / in_d->c;
    for (n = 0; n < in_d->n; n++) {
        for (oy = 0; oy < out_d->h; oy++) {
            for (ox = 0; ox < out_d->w; ox++) {
                int8_t *y = output + ((n * out_d->h + oy) * out_d->w + ox) * out_d->c;
                for (o = 0; o < out_d->c; o++) {
                    int32_t acc = bias[o];
                    int32_t ky, kx;
                    for (ky = 0; ky < f_d->h; ky++) {
                        const int32_t iy = oy * p->stride_h - p->pad_top + ky;
                        if (iy < 0 || iy >= in_d->h) {
                            continue; /* padding: (z_x - z_x) * w = 0 */
                        }
                        for (kx = 0; kx < f_d->w; kx++) {
                            const int32_t ix = ox * p->stride_w - p->pad_left + kx;
                            int32_t x;
                            if (ix < 0 || ix >= in_d->w) {
                                continue;
                            }
                            x = input[((n * in_d->h + iy) * in_d->w + ix) * in_d->c + o / m];
                            /* NOTE: |acc| <= |bias| + 255 * sum|w| < 2^31 (checked at export) */
                            acc += (x - p->input_zero_point) * (int32_t)filter[(o * f_d->h + ky) * f_d->w + kx];
                        }
                    }
                    y[o] = mt_requantize(acc, quant->multiplier[o], quant->shift[o], p->output_zero_point,
                                         p->act_min, p->act_max);
                }
            }
        }
    }
}

#endif /* MT_DEPTHWISE_CONV2D_FWD_S8_REF_H */
