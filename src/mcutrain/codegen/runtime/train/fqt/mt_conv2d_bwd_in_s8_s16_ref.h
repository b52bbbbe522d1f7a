/*
 * The bodies of mt_conv2d_bwd_in_s8_s16 and mt_conv2d_bwd_in_s8_s16_keep, always inline, shared by
 * the reference (train/fqt/mt_conv2d_bwd_in_s8_s16.c) and its DSP twin
 * (dsp/mt_conv2d_bwd_in_s8_s16.c): the errors go to `fast` first (the twin's DSP paths; NULL in
 * the reference), and to the reference loop where it declines them, so both builds share one
 * definition of the checks and the result.
 */
#ifndef MT_CONV2D_BWD_IN_S8_S16_REF_H
#define MT_CONV2D_BWD_IN_S8_S16_REF_H

#include <stddef.h>

#include "mt_arch.h"
#include "mt_fixedpoint.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"

#define MT_BWD_IN_BLOCK 32 /* input channels summed at once: 128 bytes of int32 on the stack */

/* A fast path over o_n error columns (channel keep[t] in column t, keep NULL: channel t; n_keep of
   them hold a channel): non-zero when it did them, 0 to leave them to the reference loop. */
typedef int (*mt_bwd_in_fast_fn)(const mt_conv_params *params,
                                 const int32_t *keep,
                                 int32_t n_keep,
                                 int32_t o_n,
                                 const mt_dims *output_dims,
                                 const int16_t *e16,
                                 const mt_dims *filter_dims,
                                 const int8_t *filter,
                                 const mt_dims *input_dims,
                                 int32_t multiplier,
                                 int32_t shift,
                                 int8_t *e_x,
                                 int32_t *acc_min,
                                 int32_t *acc_max);

/*
 * The reference loop over n error columns of rows o_n apart: column cols[t] (cols NULL: t) holds the
 * error of channel keep[t] (keep NULL: the column's own index).
 */
MT_INLINE void mt_conv2d_bwd_in_s8_s16_cols_ref(const mt_conv_params *params,
                                                const int32_t *keep,
                                                const int32_t *cols,
                                                int32_t n,
                                                int32_t o_n,
                                                const mt_dims *output_dims,
                                                const int16_t *e16,
                                                const mt_dims *filter_dims,
                                                const int8_t *filter,
                                                const mt_dims *input_dims,
                                                int32_t multiplier,
                                                int32_t shift,
                                                int8_t *e_x,
                                                int32_t *acc_min,
                                                int32_t *acc_max)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t sh = params->stride_h, sw = params->stride_w;
    int32_t b, y, x, c;
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < h; ++y) {
            for (x = 0; x < w; ++x) {
                int32_t c0;
                for (c0 = 0; c0 < c_n; c0 += MT_BWD_IN_BLOCK) { /* a block of input channels at a time */
                    const int32_t cb = c_n - c0 < MT_BWD_IN_BLOCK ? c_n - c0 : MT_BWD_IN_BLOCK;
                    int32_t acc[MT_BWD_IN_BLOCK];
                    int32_t i, j, t;
                    for (c = 0; c < cb; ++c) {
                        acc[c] = 0;
                    }
                    for (i = 0; i < kh; ++i) {
                        const int32_t ty = y + params->pad_top - i;
                        int32_t oy;
                        if (ty < 0 || ty % sh != 0 || (oy = ty / sh) >= ho) {
                            continue;
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t tx = x + params->pad_left - j;
                            const int16_t *pe;
                            const int8_t *pw;
                            int32_t ox;
                            if (tx < 0 || tx % sw != 0 || (ox = tx / sw) >= wo) {
                                continue;
                            }
                            pe = e16 + ((b * ho + oy) * wo + ox) * o_n;
                            pw = filter + (i * kw + j) * c_n + c0;
                            for (t = 0; t < n; ++t) {
                                const int32_t col = cols ? cols[t] : t;
                                const int32_t ev = pe[col];
                                const int8_t *wr = pw + (keep ? keep[t] : col) * kh * kw * c_n;
                                if (ev == 0) {
                                    continue; /* exact: a zero error adds nothing (errors after ReLU masks) */
                                }
                                for (c = 0; c < cb; ++c) { /* contiguous weights of tap (i, j) */
                                    acc[c] += ev * wr[c];
                                }
                            }
                        }
                    }
                    for (c = 0; c < cb; ++c) {
                        const int32_t v = acc[c];
                        *acc_min = v < *acc_min ? v : *acc_min;
                        *acc_max = v > *acc_max ? v : *acc_max;
                        if (e_x) {
                            e_x[((b * h + y) * w + x) * c_n + c0 + c] =
                                mt_requantize_single(v, multiplier, shift, 0, -127, 127);
                        }
                    }
                }
            }
        }
    }
}

/* mt_conv2d_bwd_in_s8_s16 (mt_fqt.h), with `fast` (NULL: none) tried first on every channel. */
MT_INLINE mt_status mt_conv2d_bwd_in_s8_s16_with(const mt_conv_params *params,
                                                 const int32_t *channels,
                                                 int32_t n_channels,
                                                 const mt_dims *output_dims,
                                                 const int16_t *e16,
                                                 const mt_dims *filter_dims,
                                                 const int8_t *filter,
                                                 const mt_dims *input_dims,
                                                 int32_t multiplier,
                                                 int32_t shift,
                                                 int8_t *e_x,
                                                 int32_t *acc_min,
                                                 int32_t *acc_max,
                                                 mt_bwd_in_fast_fn fast)
{
    if (!params || !e16 || !filter || !acc_min || !acc_max || params->groups != 1 ||
        filter_dims->c != input_dims->c) {
        return MT_ERR_ARG;
    }
    if (fast && !channels &&
        fast(params, NULL, filter_dims->n, filter_dims->n, output_dims, e16, filter_dims, filter, input_dims,
             multiplier, shift, e_x, acc_min, acc_max)) {
        return MT_OK;
    }
    mt_conv2d_bwd_in_s8_s16_cols_ref(params, NULL, channels, channels ? n_channels : filter_dims->n, filter_dims->n,
                                     output_dims, e16, filter_dims, filter, input_dims, multiplier, shift, e_x,
                                     acc_min, acc_max);
    return MT_OK;
}

/* mt_conv2d_bwd_in_s8_s16_keep (mt_fqt_keep.h), with `fast` (NULL: none) tried first. */
MT_INLINE mt_status mt_conv2d_bwd_in_s8_s16_keep_with(const mt_conv_params *params,
                                                      const int32_t *keep,
                                                      int32_t n_keep,
                                                      const mt_dims *output_dims,
                                                      const int16_t *e16,
                                                      const mt_dims *filter_dims,
                                                      const int8_t *filter,
                                                      const mt_dims *input_dims,
                                                      int32_t multiplier,
                                                      int32_t shift,
                                                      int8_t *e_x,
                                                      int32_t *acc_min,
                                                      int32_t *acc_max,
                                                      mt_bwd_in_fast_fn fast)
{
    int32_t stride;
    if (!params || !keep || !e16 || !filter || !acc_min || !acc_max || params->groups != 1 ||
        filter_dims->c != input_dims->c || n_keep < 0 || n_keep > filter_dims->n) {
        return MT_ERR_ARG;
    }
    stride = MT_FQT_KEEP_STRIDE(n_keep, filter_dims->n);
    if (fast && fast(params, keep, n_keep, stride, output_dims, e16, filter_dims, filter, input_dims, multiplier,
                     shift, e_x, acc_min, acc_max)) {
        return MT_OK;
    }
    mt_conv2d_bwd_in_s8_s16_cols_ref(params, keep, NULL, n_keep, stride, output_dims, e16, filter_dims, filter,
                                     input_dims, multiplier, shift, e_x, acc_min, acc_max);
    return MT_OK;
}

#endif /* MT_CONV2D_BWD_IN_S8_S16_REF_H */
