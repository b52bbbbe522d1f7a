/*
 * mcutrain runtime: mt_conv2d_fwd_s8, the plain and grouped 2-d convolution (see mt_nn.h).
 *
 * Helium (MVE) twin of nn/mt_conv2d_fwd_s8.c, bit-exact with it: per output pixel, the im2col
 * column of int8 inputs (z_x in the padding, so padded taps add w * 0 after the fold of
 * mt_mve.h), then four output channels at a time share each 16-byte load of the column
 * (VMLADAVA.S8: 16 products per instruction), and the requantization runs four channels per
 * vector (mt_mve.h). A one-channel input (a first conv over a grey image or a signal) builds no
 * column: each pixel's window is one gather from padded rows on the stack (mt_mve_c1.h), its
 * four channels' accumulators requantized as one vector. The GEMM path uses the first K bytes of the DSP twin's scratch (the size it reports is
 * the DSP twin's, which the planner mirrors). Grouped convs, a scratch too small, or a build
 * without MVE run the reference body (mt_conv_ref.h).
 */
#include <string.h>

#include "mt_conv_ref.h"
#include "mt_mve.h"
#include "mt_mve_c1.h"
#include "mt_mve_conv.h"
#include "mt_nn.h"

/* NOTE: the DSP twin's block bound; the same scratch formula keeps the planner's mirror true. */
#define MT_CONV_WIDE_K_MAX 256

#if MT_MVE

/* The n pixels' accumulators of channels o .. o + rows (rows <= 4; pixels o_n bytes apart in out)
   requantized and stored; `vec` and `floor` constants of each copy (as in mt_mve_gemm_modes). */
MT_INLINE void c1_store_body(int vec, int floor, const mt_mve_block *b, int32_t i, const mt_per_channel_quant *q,
                             int32_t o, int32_t rows, const int32_t *acc, int32_t n, int32_t o_n, int32_t zy,
                             int32_t lo, int32_t hi, int8_t *out)
{
    const int32x4_t m = vldrwq_s32(b->mult + i);
    const int32x4_t nsh = vldrwq_s32(b->nsh + i);
    const int32x4_t c1 = vldrwq_s32(b->c1 + i);
    int32_t x;
    for (x = 0; x < n; ++x, acc += 4, out += o_n) {
        mt_mve_store4(vec, floor, vldrwq_s32(acc), m, nsh, c1, q, o, rows, zy, lo, hi, out);
    }
}

MT_INLINE void c1_store_modes(const mt_mve_block *b, int32_t i, const mt_per_channel_quant *q, int32_t o,
                              int32_t rows, const int32_t *acc, int32_t n, int32_t o_n, int32_t zy, int32_t lo,
                              int32_t hi, int8_t *out)
{
    if (b->vec && zy == -128) {
        c1_store_body(1, 1, b, i, q, o, rows, acc, n, o_n, zy, lo, hi, out);
    } else if (b->vec) {
        c1_store_body(1, 0, b, i, q, o, rows, acc, n, o_n, zy, lo, hi, out);
    } else {
        c1_store_body(0, 0, b, i, q, o, rows, acc, n, o_n, zy, lo, hi, out);
    }
}

/* c1_store_modes with four whole rows a constant (no predicate test per pixel) or any fewer. */
static MT_NOINLINE void c1_store(const mt_mve_block *b, int32_t i, const mt_per_channel_quant *q, int32_t o,
                                 int32_t rows, const int32_t *acc, int32_t n, int32_t o_n, int32_t zy, int32_t lo,
                                 int32_t hi, int8_t *out)
{
    if (rows == 4) {
        c1_store_modes(b, i, q, o, 4, acc, n, o_n, zy, lo, hi, out);
    } else {
        c1_store_modes(b, i, q, o, rows, acc, n, o_n, zy, lo, hi, out);
    }
}

/* The one-channel conv by gathers (mt_mve_c1.h); 0 (nothing written) when the shape does not fit. */
static int conv_c1(const mt_conv_params *p, const mt_per_channel_quant *q, const mt_dims *in_d, const int8_t *input,
                   const mt_dims *f_d, const int8_t *filter, const int32_t *bias, const mt_dims *out_d,
                   int8_t *output)
{
    const int32_t o_n = f_d->n, kh = f_d->h, k = kh * f_d->w;
    const int32_t ho = out_d->h, wo = out_d->w, sw = p->stride_w;
    int8_t buf[MT_MVE_C1_BUF];
    uint8x16_t offs;
    int32_t acc[4 * MT_MVE_C1_RUN];
    int32_t wp; /* bytes of a padded row */
    int32_t o0, i, bn, y, x;
    if (!mt_mve_c1_offsets(p, in_d, f_d, out_d, &wp, &offs)) {
        return 0;
    }
    for (o0 = 0; o0 < o_n; o0 += MT_MVE_BLOCK) {
        const int32_t nb = o_n - o0 < MT_MVE_BLOCK ? o_n - o0 : MT_MVE_BLOCK;
        mt_mve_block b;
        mt_mve_prepare(&b, filter, k, k, bias, q, p->input_zero_point, p->output_zero_point, o0, nb);
        for (bn = 0; bn < in_d->n; ++bn) {
            for (y = 0; y < ho; ++y) {
                int8_t *out = output + ((bn * ho + y) * wo) * o_n + o0;
                mt_mve_c1_rows(p, in_d, input + bn * in_d->h * in_d->w, kh, y, wp, buf);
                for (i = 0; i < nb; i += 4) {
                    const int32_t rows = nb - i < 4 ? nb - i : 4;
                    int8x16_t wv[4];
                    mt_mve_c1_weights(filter, k, o0 + i, rows, wv);
                    for (x = 0; x < wo; x += MT_MVE_C1_RUN) {
                        const int32_t n = wo - x < MT_MVE_C1_RUN ? wo - x : MT_MVE_C1_RUN;
                        mt_mve_c1_dots(b.bias + i, wv, buf + x * sw, offs, sw, n, acc);
                        c1_store(&b, i, q, o0 + i, rows, acc, n, o_n, p->output_zero_point, p->act_min,
                                 p->act_max, out + x * o_n + i);
                    }
                }
            }
        }
    }
    return 1;
}

#endif /* MT_MVE */

int32_t mt_conv2d_fwd_s8_get_buffer_size(const mt_dims *filter_dims)
{
#if MT_DSP
    const int32_t k = filter_dims->h * filter_dims->w * filter_dims->c;
    return 2 * (k <= MT_CONV_WIDE_K_MAX ? 7 : 2) * k + ((filter_dims->c & 3) != 0 ? 2 * k : 0);
#else  /* !MT_DSP */
    (void)filter_dims;
    return 0;
#endif /* MT_DSP */
}

mt_status mt_conv2d_fwd_s8(const mt_context *ctx,
                           const mt_conv_params *params,
                           const mt_per_channel_quant *quant,
                           const mt_dims *input_dims,
                           const int8_t *input,
                           const mt_dims *filter_dims,
                           const int8_t *filter,
                           const int32_t *bias,
                           const mt_dims *output_dims,
                           int8_t *output)
{
    const mt_status st =
        mt_conv_check_args(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output);
    if (st != MT_OK) {
        return st;
    }
#if MT_MVE
    if (conv_c1(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output)) {
        return MT_OK;
    }
    if (params->groups == 1 && ctx && ctx->buf &&
        ctx->size >= filter_dims->h * filter_dims->w * filter_dims->c) {
        const int32_t k = filter_dims->h * filter_dims->w * filter_dims->c;
        const int32_t fit = ctx->size / k;
        mt_mve_conv(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output,
                    (int8_t *)ctx->buf, fit < MT_MVE_COLS ? fit : MT_MVE_COLS, 0, 0);
        return MT_OK;
    }
#else  /* !MT_MVE */
    (void)ctx;
#endif /* MT_MVE */
    mt_conv_ref(params, quant, input_dims, input, filter_dims, filter, 0, bias, output_dims, output);
    return MT_OK;
}
