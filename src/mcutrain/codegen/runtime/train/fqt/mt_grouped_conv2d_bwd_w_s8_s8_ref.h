/*
 * The reference body of mt_grouped_conv2d_bwd_w_s8_s8 (its DSP twin dsp/mt_grouped_conv2d_bwd_w_s8_s8.c runs it for
 * what it does not take): Weight and bias gradients of a grouped conv (depthwise included) from the stored input and int8
 * errors (Python twin: fqt_kernels.conv2d_bwd_w_acc in mode "int", groups > 1, and bias_grad_acc),
 * accumulated into int32 buffers: g[o, i, j, c] += sum over output positions of
 * e[o] * (x[.., g * cig + c] - z_x) (padding is real 0), gb[o] += sum of e[o].
 * NOTE: each element sums one product per output position, |e * (x - z_x)| <= 127 * 255, so
 * int32 holds batch * positions <= 66311 products (the exporter checks the bound).
 */
#ifndef MT_GROUPED_CONV2D_BWD_W_S8_S8_REF_H
#define MT_GROUPED_CONV2D_BWD_W_S8_S8_REF_H

#include "mt_arch.h"
#include "mt_fqt.h"


/* Depthwise: g[c, i, j] += e[c] * (x[c] - z_x), channels the inner loop. */
MT_INLINE void mt_grouped_conv2d_bwd_w_s8_s8_dw_ref(const mt_conv_params *params,
                      const mt_dims *input_dims,
                      const int8_t *input,
                      const mt_dims *output_dims,
                      const int8_t *e,
                      const mt_dims *filter_dims,
                      int32_t *grad,
                      int32_t *grad_bias)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t kh = filter_dims->h, kw = filter_dims->w, kk = kh * kw;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t zx = params->input_zero_point;
    int32_t b, oy, ox, i, j, c;
    for (b = 0; b < input_dims->n; ++b) {
        for (oy = 0; oy < ho; ++oy) {
            for (ox = 0; ox < wo; ++ox) {
                const int8_t *pe = e + ((b * ho + oy) * wo + ox) * c_n;
                for (c = 0; c < c_n; ++c) {
                    grad_bias[c] += pe[c];
                }
                for (i = 0; i < kh; ++i) {
                    const int32_t iy = oy * params->stride_h - params->pad_top + i;
                    if (iy < 0 || iy >= h) {
                        continue;
                    }
                    for (j = 0; j < kw; ++j) {
                        const int32_t ix = ox * params->stride_w - params->pad_left + j;
                        const int8_t *px;
                        int32_t *pg;
                        if (ix < 0 || ix >= w) {
                            continue;
                        }
                        px = input + ((b * h + iy) * w + ix) * c_n;
                        pg = grad + i * kw + j;
                        for (c = 0; c < c_n; ++c) {
                            pg[c * kk] += (int32_t)pe[c] * ((int32_t)px[c] - zx);
                        }
                    }
                }
            }
        }
    }
}

MT_INLINE mt_status mt_grouped_conv2d_bwd_w_s8_s8_ref(const mt_conv_params *params,
                                        const mt_dims *input_dims,
                                        const int8_t *input,
                                        const mt_dims *output_dims,
                                        const int8_t *e,
                                        const mt_dims *filter_dims,
                                        int32_t *grad,
                                        int32_t *grad_bias)
{
    int32_t h, w, c_n, o_n, kh, kw, cig, opg, ho, wo, zx, b, oy, ox, o;
    if (!params || !input_dims || !input || !output_dims || !e || !filter_dims || !grad || !grad_bias ||
        params->groups < 1) {
        return MT_ERR_ARG;
    }
    h = input_dims->h;
    w = input_dims->w;
    c_n = input_dims->c;
    o_n = filter_dims->n;
    kh = filter_dims->h;
    kw = filter_dims->w;
    cig = filter_dims->c;
    opg = o_n / params->groups;
    ho = output_dims->h;
    wo = output_dims->w;
    zx = params->input_zero_point;
    if (cig * params->groups != c_n || opg * params->groups != o_n || output_dims->c != o_n) {
        return MT_ERR_ARG;
    }
    if (cig == 1 && opg == 1) {
        mt_grouped_conv2d_bwd_w_s8_s8_dw_ref(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias);
        return MT_OK;
    }
    for (b = 0; b < input_dims->n; ++b) {
        for (oy = 0; oy < ho; ++oy) {
            for (ox = 0; ox < wo; ++ox) {
                const int8_t *pe = e + ((b * ho + oy) * wo + ox) * o_n;
                for (o = 0; o < o_n; ++o) {
                    const int32_t ev = pe[o];
                    const int32_t g = o / opg;
                    int32_t i, j, c;
                    grad_bias[o] += ev;
                    if (ev == 0) {
                        continue; /* exact: adds nothing */
                    }
                    for (i = 0; i < kh; ++i) {
                        const int32_t iy = oy * params->stride_h - params->pad_top + i;
                        if (iy < 0 || iy >= h) {
                            continue;
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t ix = ox * params->stride_w - params->pad_left + j;
                            const int8_t *px;
                            int32_t *pg;
                            if (ix < 0 || ix >= w) {
                                continue;
                            }
                            px = input + ((b * h + iy) * w + ix) * c_n + g * cig;
                            pg = grad + ((o * kh + i) * kw + j) * cig;
                            for (c = 0; c < cig; ++c) {
                                pg[c] += ev * ((int32_t)px[c] - zx);
                            }
                        }
                    }
                }
            }
        }
    }
    return MT_OK;
}

#endif /* MT_GROUPED_CONV2D_BWD_W_S8_S8_REF_H */
