/*
 * mcutrain runtime: the FQT conv forward with ranges for one-channel inputs on Helium (MVE) cores,
 * in place of the DSP path of train/fqt/mt_conv_c1.c (mt_conv_c1.h), exact integer sums like it.
 *
 * The gathers and dot products are mt_mve_c1.h's; here the four accumulators of each pixel are
 * requantized as one vector in the library's mode and their extremes widened (the plain min/max
 * of mt_conv2d_fwd_s8_range); a block with a channel outside the prepared requantization takes
 * mt_requantize per output. Shapes the gather does not fit, or a build without MVE, return 0,
 * and mt_conv2d_fwd_s8_range takes the MVE GEMM of mt_conv_fwd_pairs (same bits).
 */
#include "mt_conv_c1.h"
#include "mt_mve.h"
#include "mt_mve_c1.h"

#if MT_MVE

/* The n pixels' accumulators (four channels, `rows` <= 4 of them stored) requantized to out (pixels
   o_n bytes apart) and widened into the extremes; `floor` a constant of each copy. */
MT_INLINE void c1_requant(int floor, const mt_mve_block *b, int32_t i, int32_t rows, const int32_t *acc, int32_t n,
                          int32_t o_n, int32_t lo, int32_t hi, int8_t *out, int32_t *acc_min, int32_t *acc_max)
{
    const int32x4_t m = vldrwq_s32(b->mult + i);
    const int32x4_t nsh = vldrwq_s32(b->nsh + i);
    const int32x4_t c1 = vldrwq_s32(b->c1 + i);
    const mve_pred16_t keep = vctp32q((uint32_t)rows);
    int32x4_t mn = vdupq_n_s32(INT32_MAX), mx = vdupq_n_s32(INT32_MIN);
    int32_t x;
    if (rows == 4) { /* whole vectors: no predicate in the loop */
        for (x = 0; x < n; ++x, acc += 4, out += o_n) {
            const int32x4_t a = vldrwq_s32(acc);
            vstrbq_s32(out, mt_mve_requantize(a, m, nsh, c1, floor, lo, hi));
            mn = vminq_s32(mn, a);
            mx = vmaxq_s32(mx, a);
        }
    } else {
        for (x = 0; x < n; ++x, acc += 4, out += o_n) {
            const int32x4_t a = vldrwq_s32(acc);
            vstrbq_p_s32(out, mt_mve_requantize(a, m, nsh, c1, floor, lo, hi), keep);
            mn = vminq_s32(mn, a);
            mx = vmaxq_s32(mx, a);
        }
    }
    mt_mve_widen_range(mn, mx, rows, acc_min, acc_max);
}

/* c1_requant for a block with a channel outside the prepared range: mt_requantize per output. */
static MT_NOINLINE void c1_requant_each(const mt_per_channel_quant *q, int32_t o, int32_t rows, const int32_t *acc,
                                        int32_t n, int32_t o_n, int32_t zy, int32_t lo, int32_t hi, int8_t *out,
                                        int32_t *acc_min, int32_t *acc_max)
{
    const mve_pred16_t keep = vctp32q((uint32_t)rows);
    int32x4_t mn = vdupq_n_s32(INT32_MAX), mx = vdupq_n_s32(INT32_MIN);
    int32_t x, j;
    for (x = 0; x < n; ++x, acc += 4, out += o_n) {
        const int32x4_t a = vldrwq_z_s32(acc, keep);
        for (j = 0; j < rows; ++j) {
            out[j] = mt_requantize(acc[j], q->multiplier[o + j], q->shift[o + j], zy, lo, hi);
        }
        mn = vminq_s32(mn, a);
        mx = vmaxq_s32(mx, a);
    }
    mt_mve_widen_range(mn, mx, rows, acc_min, acc_max);
}

/* c1_requant of the floor requantization (output zero point -128) and of any other, out of line. */
static MT_NOINLINE void c1_requant_floor(const mt_mve_block *b, int32_t i, int32_t rows, const int32_t *acc,
                                         int32_t n, int32_t o_n, int32_t lo, int32_t hi, int8_t *out,
                                         int32_t *acc_min, int32_t *acc_max)
{
    c1_requant(1, b, i, rows, acc, n, o_n, lo, hi, out, acc_min, acc_max);
}

static MT_NOINLINE void c1_requant_any(const mt_mve_block *b, int32_t i, int32_t rows, const int32_t *acc,
                                       int32_t n, int32_t o_n, int32_t lo, int32_t hi, int8_t *out,
                                       int32_t *acc_min, int32_t *acc_max)
{
    c1_requant(0, b, i, rows, acc, n, o_n, lo, hi, out, acc_min, acc_max);
}

#endif /* MT_MVE */

int mt_conv_c1_fwd(const mt_conv_params *params,
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
#if MT_MVE
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, k = kh * filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w, sw = params->stride_w;
    const int32_t zy = params->output_zero_point;
    int8_t buf[MT_MVE_C1_BUF];
    uint8x16_t offs;
    int32_t acc[4 * MT_MVE_C1_RUN];
    int32_t wp; /* bytes of a padded row */
    int32_t o0, i, bn, y, x;
    if (!mt_mve_c1_offsets(params, input_dims, filter_dims, output_dims, &wp, &offs)) {
        return 0;
    }
    for (o0 = 0; o0 < o_n; o0 += MT_MVE_BLOCK) {
        const int32_t nb = o_n - o0 < MT_MVE_BLOCK ? o_n - o0 : MT_MVE_BLOCK;
        mt_mve_block b;
        mt_mve_prepare(&b, filter, k, k, bias, quant, params->input_zero_point, zy, o0, nb);
        for (bn = 0; bn < input_dims->n; ++bn) {
            const int8_t *img = input + bn * input_dims->h * input_dims->w;
            for (y = 0; y < ho; ++y) {
                int8_t *out = output + ((bn * ho + y) * wo) * o_n + o0;
                mt_mve_c1_rows(params, input_dims, img, kh, y, wp, buf);
                for (i = 0; i < nb; i += 4) {
                    const int32_t rows = nb - i < 4 ? nb - i : 4;
                    int8x16_t wv[4];
                    mt_mve_c1_weights(filter, k, o0 + i, rows, wv);
                    for (x = 0; x < wo; x += MT_MVE_C1_RUN) {
                        const int32_t n = wo - x < MT_MVE_C1_RUN ? wo - x : MT_MVE_C1_RUN;
                        mt_mve_c1_dots(b.bias + i, wv, buf + x * sw, offs, sw, n, acc);
                        if (!b.vec) {
                            c1_requant_each(quant, o0 + i, rows, acc, n, o_n, zy, params->act_min, params->act_max,
                                            out + x * o_n + i, acc_min + o0 + i, acc_max + o0 + i);
                            continue;
                        }
                        (zy == -128 ? c1_requant_floor : c1_requant_any)(&b, i, rows, acc, n, o_n, params->act_min,
                                                                         params->act_max, out + x * o_n + i,
                                                                         acc_min + o0 + i, acc_max + o0 + i);
                    }
                }
            }
        }
    }
    return 1;
#else  /* !MT_MVE */
    (void)params, (void)quant, (void)input_dims, (void)input, (void)filter_dims, (void)filter, (void)bias;
    (void)output_dims, (void)output, (void)acc_min, (void)acc_max;
    return 0;
#endif /* MT_MVE */
}
