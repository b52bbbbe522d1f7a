/*
 * mcutrain runtime: mt_conv2d_fwd_s8, the plain and grouped 2-d convolution (see mt_nn.h).
 *
 * Helium (MVE) twin of nn/mt_conv2d_fwd_s8.c, bit-exact with it: per output pixel, the im2col
 * column of int8 inputs (z_x in the padding, so padded taps add w * 0 after the fold of
 * mt_mve.h), then four output channels at a time share each 16-byte load of the column
 * (VMLADAVA.S8: 16 products per instruction), and the requantization runs four channels per
 * vector (mt_mve.h). It uses the first K bytes of the DSP twin's scratch (the size it reports is
 * the DSP twin's, which the planner mirrors). Grouped convs, a scratch too small, or a build
 * without MVE run the reference body (mt_conv_ref.h).
 */
#include <string.h>

#include "mt_conv_ref.h"
#include "mt_mve.h"
#include "mt_nn.h"

/* NOTE: the DSP twin's block bound; the same scratch formula keeps the planner's mirror true. */
#define MT_CONV_WIDE_K_MAX 256

/* Most output pixels whose columns one pass builds (the scratch may hold fewer). */
#define MT_MVE_COLS 16

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

#if MT_MVE

/* n bytes from src to dst (n >= 0), 16 at a time, the tail predicated. */
MT_INLINE void mt_mve_copy(int8_t *dst, const int8_t *src, int32_t n)
{
    while (n > 0) {
        const mve_pred16_t p = vctp8q((uint32_t)n);
        vstrbq_p_s8(dst, vldrbq_z_s8(src, p), p);
        dst += 16;
        src += 16;
        n -= 16;
    }
}

/* n bytes of value v at dst (n >= 0). */
MT_INLINE void mt_mve_fill(int8_t *dst, int32_t v, int32_t n)
{
    const int8x16_t z = vdupq_n_s8((int8_t)v);
    while (n > 0) {
        vstrbq_p_s8(dst, z, vctp8q((uint32_t)n));
        dst += 16;
        n -= 16;
    }
}

/* The int8 column [kh, kw, C] of output pixel (oy, ox) of image `img` into col, z_x in the padding;
   an interior pixel's kernel row is one copy (one predicated load and store when kw * C <= 16). */
static void im2col_s8(const mt_conv_params *p, const mt_dims *in_d, const int8_t *img, const mt_dims *f_d,
                      int32_t oy, int32_t ox, int8_t *col)
{
    const int32_t c = in_d->c;
    const int32_t run = f_d->w * c;
    const int32_t x0 = ox * p->stride_w - p->pad_left;
    const int32_t left = x0 < 0 ? -x0 : 0;
    const int32_t end = x0 + f_d->w > in_d->w ? in_d->w - x0 : f_d->w;
    int32_t ky;
    for (ky = 0; ky < f_d->h; ky++) {
        const int32_t iy = oy * p->stride_h - p->pad_top + ky;
        int8_t *dst = col + ky * run;
        if (iy < 0 || iy >= in_d->h) {
            mt_mve_fill(dst, p->input_zero_point, run);
        } else if (left == 0 && end == f_d->w) {
            mt_mve_copy(dst, img + (iy * in_d->w + x0) * c, run);
        } else {
            mt_mve_fill(dst, p->input_zero_point, left * c);
            mt_mve_copy(dst + left * c, img + (iy * in_d->w + x0 + left) * c, (end - left) * c);
            mt_mve_fill(dst + end * c, p->input_zero_point, (f_d->w - end) * c);
        }
    }
}

/*
 * The columns of `ncols` output pixels from flat pixel `px` (raster order over batch, rows,
 * columns) into col (k bytes each). A run of pixels of one output row whose windows lie inside
 * the image is copied kernel row by kernel row, pixel after pixel (one predicated load and store
 * each when kw * C <= 16); border pixels go through im2col_s8.
 */
static void im2col_pixels(const mt_conv_params *p, const mt_dims *in_d, const int8_t *input, const mt_dims *f_d,
                          const mt_dims *out_d, int32_t px, int32_t ncols, int8_t *col)
{
    const int32_t run = f_d->w * in_d->c;
    const int32_t in_row = in_d->w * in_d->c;
    const int32_t k = f_d->h * run;
    const int32_t step = p->stride_w * in_d->c;
    const int32_t last_inside = (in_d->w - f_d->w + p->pad_left) / p->stride_w; /* last ox inside */
    const mve_pred16_t short_run = vctp8q((uint32_t)run);
    int32_t n = px / (out_d->h * out_d->w);
    int32_t oy = (px - n * out_d->h * out_d->w) / out_d->w;
    int32_t ox = px % out_d->w;
    int32_t j = 0;
    while (j < ncols) {
        const int8_t *img = input + n * in_d->h * in_row;
        const int32_t x0 = ox * p->stride_w - p->pad_left;
        const int32_t y0 = oy * p->stride_h - p->pad_top;
        int32_t cnt = 1;
        if (x0 >= 0 && x0 + f_d->w <= in_d->w && y0 >= 0 && y0 + f_d->h <= in_d->h && ox <= last_inside) {
            int32_t ky, i;
            cnt = last_inside - ox + 1;
            cnt = cnt < out_d->w - ox ? cnt : out_d->w - ox;
            cnt = cnt < ncols - j ? cnt : ncols - j;
            for (ky = 0; ky < f_d->h; ky++) {
                const int8_t *src = img + (y0 + ky) * in_row + x0 * in_d->c;
                int8_t *dst = col + j * k + ky * run;
                if (run <= 16) {
                    for (i = 0; i < cnt; i++, src += step, dst += k) {
                        vstrbq_p_s8(dst, vldrbq_z_s8(src, short_run), short_run);
                    }
                } else {
                    for (i = 0; i < cnt; i++, src += step, dst += k) {
                        mt_mve_copy(dst, src, run);
                    }
                }
            }
        } else {
            im2col_s8(p, in_d, img, f_d, oy, ox, col + j * k);
        }
        j += cnt;
        ox += cnt;
        if (ox == out_d->w) {
            ox = 0;
            if (++oy == out_d->h) {
                oy = 0;
                n++;
            }
        }
    }
}

/* Output pixels are taken `ncols_max` at a time: their columns are built once into the scratch,
   then every block of output channels runs over them. */
static void conv_mve(const mt_conv_params *p, const mt_per_channel_quant *q, const mt_dims *in_d,
                     const int8_t *input, const mt_dims *f_d, const int8_t *filter, const int32_t *bias,
                     const mt_dims *out_d, int8_t *output, int8_t *col, int32_t ncols_max)
{
    const int32_t k = f_d->h * f_d->w * f_d->c;
    const int32_t o_n = f_d->n;
    const int32_t pixels = out_d->n * out_d->h * out_d->w;
    int32_t o0, px;
    for (o0 = 0; o0 < o_n; o0 += MT_MVE_BLOCK) {
        const int32_t nb = o_n - o0 < MT_MVE_BLOCK ? o_n - o0 : MT_MVE_BLOCK;
        mt_mve_block b;
        mt_mve_prepare(&b, filter, k, k, bias, q, p->input_zero_point, p->output_zero_point, o0, nb);
        for (px = 0; px < pixels; px += ncols_max) {
            const int32_t ncols = pixels - px < ncols_max ? pixels - px : ncols_max;
            im2col_pixels(p, in_d, input, f_d, out_d, px, ncols, col);
            mt_mve_gemm(&b, filter + o0 * k, k, k, col, ncols, k, q, o0, nb, p->output_zero_point, p->act_min,
                        p->act_max, output + px * o_n + o0, o_n);
        }
    }
}

#endif /* MT_MVE */

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
    if (params->groups == 1 && ctx && ctx->buf &&
        ctx->size >= filter_dims->h * filter_dims->w * filter_dims->c) {
        const int32_t k = filter_dims->h * filter_dims->w * filter_dims->c;
        const int32_t fit = ctx->size / k;
        conv_mve(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output,
                 (int8_t *)ctx->buf, fit < MT_MVE_COLS ? fit : MT_MVE_COLS);
        return MT_OK;
    }
#else  /* !MT_MVE */
    (void)ctx;
#endif /* MT_MVE */
    mt_conv_ref(params, quant, input_dims, input, filter_dims, filter, 0, bias, output_dims, output);
    return MT_OK;
}
