/*
 * The reference body of mt_grouped_conv2d_bwd_in_s8_s16 (its DSP twin dsp/mt_grouped_conv2d_bwd_in_s8_s16.c runs it for
 * what it does not take): Transposed grouped conv (depthwise and dense included) of prescaled int16 errors with int8
 * weights (Python twin: fqt_kernels.conv2d_bwd_in_acc in mode "int", then fqt.FQT._to_err or,
 * for a tensor with several consumers, fqt.FQT._as_real).
 * Input channel c of group g = c / cig gathers, over the taps whose window covers its position,
 * the errors of the group's output channels o = g * opg ... times w[o, i, j, c - g * cig].
 * NOTE: |e16 * w| <= 32512 * 127, so up to MT_BWD_IN_TERMS products fit an int32 sum in any
 * order; longer sums (dense 1x1 convs with many output channels) are flushed into int64 every
 * MT_BWD_IN_TERMS products, which keeps them exact. A requantized (or range-only) result beyond
 * int32 is refused (MT_ERR_ARG), as the Python twin's requantize refuses it.
 */
#ifndef MT_GROUPED_CONV2D_BWD_IN_S8_S16_REF_H
#define MT_GROUPED_CONV2D_BWD_IN_S8_S16_REF_H

#include "mt_fixedpoint.h"
#include "mt_arch.h"
#include "mt_fqt.h"
#include "mt_train_math.h"


#define MT_GBWD_BLOCK 16      /* input channels summed at once (stack accumulators) */
#define MT_BWD_IN_TERMS 520   /* (2^31 - 1) / (32512 * 127): products an int32 sum holds */

/* Range, then the int8 or float32 output of one accumulator. */
MT_INLINE mt_status mt_gbwd_in_emit_one(int64_t v,
                          int32_t multiplier,
                          int32_t shift,
                          int8_t *e_x,
                          float s_acc,
                          float *e_real,
                          int32_t at,
                          int32_t *acc_min,
                          int32_t *acc_max)
{
    if (e_real) {
        e_real[at] = mt_s64_to_f32(v) * s_acc; /* _as_real: float32(acc) * s_acc */
        return MT_OK;
    }
    if (v > INT32_MAX || v < INT32_MIN) {
        return MT_ERR_ARG;
    }
    *acc_min = (int32_t)v < *acc_min ? (int32_t)v : *acc_min;
    *acc_max = (int32_t)v > *acc_max ? (int32_t)v : *acc_max;
    if (e_x) {
        e_x[at] = mt_requantize_single((int32_t)v, multiplier, shift, 0, -127, 127);
    }
    return MT_OK;
}

/* Depthwise (one input channel and one output channel per group): channels are the inner loop. */
MT_INLINE mt_status mt_grouped_conv2d_bwd_in_s8_s16_dw_ref(const mt_conv_params *params,
                           const mt_dims *output_dims,
                           const int16_t *e16,
                           const mt_dims *filter_dims,
                           const int8_t *filter,
                           const mt_dims *input_dims,
                           int32_t multiplier,
                           int32_t shift,
                           int8_t *e_x,
                           float s_acc,
                           float *e_real,
                           int32_t *acc_min,
                           int32_t *acc_max)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t kh = filter_dims->h, kw = filter_dims->w, kk = kh * kw;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t sh = params->stride_h, sw = params->stride_w;
    int32_t b, y, x, c0, c;
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < h; ++y) {
            for (x = 0; x < w; ++x) {
                for (c0 = 0; c0 < c_n; c0 += MT_GBWD_BLOCK) {
                    const int32_t cb = c_n - c0 < MT_GBWD_BLOCK ? c_n - c0 : MT_GBWD_BLOCK;
                    int32_t acc[MT_GBWD_BLOCK];
                    int32_t i, j;
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
                            pe = e16 + ((b * ho + oy) * wo + ox) * c_n + c0;
                            pw = filter + c0 * kk + i * kw + j;
                            for (c = 0; c < cb; ++c) { /* NOTE: kh * kw <= MT_BWD_IN_TERMS (exporter) */
                                acc[c] += (int32_t)pe[c] * pw[c * kk];
                            }
                        }
                    }
                    for (c = 0; c < cb; ++c) {
                        const mt_status st = mt_gbwd_in_emit_one(acc[c], multiplier, shift, e_x, s_acc, e_real,
                                                      ((b * h + y) * w + x) * c_n + c0 + c, acc_min, acc_max);
                        if (st != MT_OK) {
                            return st;
                        }
                    }
                }
            }
        }
    }
    return MT_OK;
}

MT_INLINE mt_status mt_grouped_conv2d_bwd_in_s8_s16_ref(const mt_conv_params *params,
                                          const mt_dims *output_dims,
                                          const int16_t *e16,
                                          const mt_dims *filter_dims,
                                          const int8_t *filter,
                                          const mt_dims *input_dims,
                                          int32_t multiplier,
                                          int32_t shift,
                                          int8_t *e_x,
                                          float s_acc,
                                          float *e_real,
                                          int32_t *acc_min,
                                          int32_t *acc_max)
{
    int32_t h, w, c_n, o_n, kh, kw, cig, opg, ho, wo, sh, sw, b, y, x;
    if (!params || !output_dims || !e16 || !filter_dims || !filter || !input_dims || !acc_min || !acc_max ||
        (e_x && e_real) || params->groups < 1) {
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
    sh = params->stride_h;
    sw = params->stride_w;
    if (cig * params->groups != c_n || opg * params->groups != o_n || output_dims->c != o_n || sh < 1 || sw < 1) {
        return MT_ERR_ARG;
    }
    if (cig == 1 && opg == 1) {
        return mt_grouped_conv2d_bwd_in_s8_s16_dw_ref(params, output_dims, e16, filter_dims, filter, input_dims, multiplier, shift, e_x, s_acc,
                         e_real, acc_min, acc_max);
    }
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < h; ++y) {
            for (x = 0; x < w; ++x) {
                int32_t g;
                for (g = 0; g < params->groups; ++g) {
                    int32_t c0;
                    for (c0 = 0; c0 < cig; c0 += MT_GBWD_BLOCK) { /* a block of the group's input channels */
                        const int32_t cb = cig - c0 < MT_GBWD_BLOCK ? cig - c0 : MT_GBWD_BLOCK;
                        int32_t acc[MT_GBWD_BLOCK];
                        int64_t tot[MT_GBWD_BLOCK];
                        int32_t terms = 0;
                        int32_t i, j, o, c;
                        for (c = 0; c < cb; ++c) {
                            acc[c] = 0;
                            tot[c] = 0;
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
                                int32_t ox;
                                if (tx < 0 || tx % sw != 0 || (ox = tx / sw) >= wo) {
                                    continue;
                                }
                                pe = e16 + ((b * ho + oy) * wo + ox) * o_n + g * opg;
                                for (o = 0; o < opg; ++o) {
                                    const int32_t ev = pe[o];
                                    const int8_t *wr = filter + (((g * opg + o) * kh + i) * kw + j) * cig + c0;
                                    if (ev == 0) {
                                        continue; /* exact: a zero error adds nothing (masked errors) */
                                    }
                                    if (++terms > MT_BWD_IN_TERMS) { /* flush before an int32 sum could overflow */
                                        for (c = 0; c < cb; ++c) {
                                            tot[c] += acc[c];
                                            acc[c] = 0;
                                        }
                                        terms = 1;
                                    }
                                    for (c = 0; c < cb; ++c) { /* contiguous weights of tap (i, j) */
                                        acc[c] += ev * wr[c];
                                    }
                                }
                            }
                        }
                        for (c = 0; c < cb; ++c) {
                            const mt_status st = mt_gbwd_in_emit_one(tot[c] + acc[c], multiplier, shift, e_x, s_acc, e_real,
                                                          ((b * h + y) * w + x) * c_n + g * cig + c0 + c, acc_min,
                                                          acc_max);
                            if (st != MT_OK) {
                                return st;
                            }
                        }
                    }
                }
            }
        }
    }
    return MT_OK;
}

#endif /* MT_GROUPED_CONV2D_BWD_IN_S8_S16_REF_H */
