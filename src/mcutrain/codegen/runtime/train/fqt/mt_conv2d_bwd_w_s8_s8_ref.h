/*
 * The bodies of mt_conv2d_bwd_w_s8_s8 and mt_conv2d_bwd_w_s8_s8_keep, always inline, shared by the
 * reference (train/fqt/mt_conv2d_bwd_w_s8_s8.c) and its DSP twin (dsp/mt_conv2d_bwd_w_s8_s8.c),
 * which pass the loop over the filters as a constant `filters` (inlined): the reference loop
 * below, or the twin's DSP loops. Both builds share one definition of the checks and of the kept
 * rows' zeroing.
 */
#ifndef MT_CONV2D_BWD_W_S8_S8_REF_H
#define MT_CONV2D_BWD_W_S8_S8_REF_H

#include <stddef.h>

#include "mt_arch.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"

/* Gradients of the filters keep[0..n) (keep NULL: 0..n) from errors e[position, O], added in. */
typedef void (*mt_conv_bwd_w_filters_fn)(const mt_conv_params *params,
                                         const int32_t *keep,
                                         int32_t n,
                                         const mt_dims *input_dims,
                                         const int8_t *input,
                                         const mt_dims *output_dims,
                                         const int8_t *e,
                                         const mt_dims *filter_dims,
                                         int32_t *grad,
                                         int32_t *grad_bias);

/* The reference loop over the filters keep[0..n) (keep NULL: 0..n), errors e[position, O]. */
MT_INLINE void mt_conv2d_bwd_w_s8_s8_filters_ref(const mt_conv_params *params,
                                                 const int32_t *keep,
                                                 int32_t n,
                                                 const mt_dims *input_dims,
                                                 const int8_t *input,
                                                 const mt_dims *output_dims,
                                                 const int8_t *e,
                                                 const mt_dims *filter_dims,
                                                 int32_t *grad,
                                                 int32_t *grad_bias)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t zx = params->input_zero_point;
    int32_t b, y, x, t;
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                const int8_t *pe = e + ((b * ho + y) * wo + x) * o_n;
                for (t = 0; t < n; ++t) {
                    const int32_t o = keep ? keep[t] : t;
                    const int32_t eo = pe[o];
                    int32_t *g = grad + o * kh * kw * c_n;
                    int32_t i, j, c;
                    if (eo == 0) {
                        continue; /* exact: a zero error adds nothing */
                    }
                    grad_bias[o] += eo;
                    for (i = 0; i < kh; ++i) {
                        const int32_t iy = y * params->stride_h - params->pad_top + i;
                        if (iy < 0 || iy >= h) {
                            continue;
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t ix = x * params->stride_w - params->pad_left + j;
                            const int8_t *px;
                            int32_t *gt;
                            if (ix < 0 || ix >= w) {
                                continue;
                            }
                            px = input + ((b * h + iy) * w + ix) * c_n;
                            gt = g + (i * kw + j) * c_n;
                            for (c = 0; c < c_n; ++c) {
                                gt[c] += eo * ((int32_t)px[c] - zx);
                            }
                        }
                    }
                }
            }
        }
    }
}

/* mt_conv2d_bwd_w_s8_s8 (mt_fqt.h) with `filters` doing every filter. */
MT_INLINE mt_status mt_conv2d_bwd_w_s8_s8_with(const mt_conv_params *params,
                                               const mt_dims *input_dims,
                                               const int8_t *input,
                                               const mt_dims *output_dims,
                                               const int8_t *e,
                                               const mt_dims *filter_dims,
                                               int32_t *grad,
                                               int32_t *grad_bias,
                                               mt_conv_bwd_w_filters_fn filters)
{
    if (!params || !input || !e || !grad || !grad_bias || params->groups != 1 || filter_dims->c != input_dims->c) {
        return MT_ERR_ARG;
    }
    filters(params, NULL, filter_dims->n, input_dims, input, output_dims, e, filter_dims, grad, grad_bias);
    return MT_OK;
}

/* mt_conv2d_bwd_w_s8_s8_keep (mt_fqt_keep.h) with `filters` doing the kept filters. */
MT_INLINE mt_status mt_conv2d_bwd_w_s8_s8_keep_with(const mt_conv_params *params,
                                                    const int32_t *keep,
                                                    int32_t n_keep,
                                                    const mt_dims *input_dims,
                                                    const int8_t *input,
                                                    const mt_dims *output_dims,
                                                    const int8_t *e,
                                                    const mt_dims *filter_dims,
                                                    int32_t *grad,
                                                    int32_t *grad_bias,
                                                    mt_conv_bwd_w_filters_fn filters)
{
    const int32_t kk = filter_dims->h * filter_dims->w * input_dims->c;
    int32_t t, k;
    if (!params || !keep || !input || !e || !grad || !grad_bias || params->groups != 1 ||
        filter_dims->c != input_dims->c || n_keep < 0 || n_keep > filter_dims->n) {
        return MT_ERR_ARG;
    }
    for (t = 0; t < n_keep; ++t) { /* overwrite: the kept rows start from 0 */
        int32_t *g = grad + keep[t] * kk;
        for (k = 0; k < kk; ++k) {
            g[k] = 0;
        }
        grad_bias[keep[t]] = 0;
    }
    filters(params, keep, n_keep, input_dims, input, output_dims, e, filter_dims, grad, grad_bias);
    return MT_OK;
}

#endif /* MT_CONV2D_BWD_W_S8_S8_REF_H */
