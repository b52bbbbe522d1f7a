/*
 * mcutrain runtime: the Helium (MVE) convolution the conv twins share (not part of the API): int8
 * im2col columns of a batch of output pixels (z_x in the padding, so padded taps add w * 0 after
 * the fold of mt_mve.h), then every block of output channels over them through the GEMM of
 * mt_mve.h, of inference (mve/mt_conv2d_fwd_s8.c) or, with the channels' running accumulator
 * extremes, of the FQT forward (mve/mt_conv_fwd_pairs.c).
 */
#ifndef MT_MVE_CONV_H
#define MT_MVE_CONV_H

#include "mt_mve.h"
#include "mt_mve_gemm.h"
#include "mt_mve_range.h"
#include "mt_nn.h"

/* Most output pixels whose columns one pass builds (the scratch may hold fewer). */
#define MT_MVE_COLS 16

#if MT_MVE

/* n bytes from src to dst (n >= 0), 16 at a time, only the tail predicated. NOTE: a predicate
   computed in the loop cost GCC 11 instructions per 16 bytes (VMRS, SXTH, VMSR, two VPST). */
MT_INLINE void mt_mve_copy(int8_t *dst, const int8_t *src, int32_t n)
{
    for (; n >= 16; n -= 16, dst += 16, src += 16) {
        vstrbq_s8(dst, vldrbq_s8(src));
    }
    if (n > 0) {
        const mve_pred16_t p = vctp8q((uint32_t)n);
        vstrbq_p_s8(dst, vldrbq_z_s8(src, p), p);
    }
}

/* n bytes of value v at dst (n >= 0), only the tail predicated (as mt_mve_copy). */
MT_INLINE void mt_mve_fill(int8_t *dst, int32_t v, int32_t n)
{
    const int8x16_t z = vdupq_n_s8((int8_t)v);
    for (; n >= 16; n -= 16, dst += 16) {
        vstrbq_s8(dst, z);
    }
    if (n > 0) {
        vstrbq_p_s8(dst, z, vctp8q((uint32_t)n));
    }
}

/* The int8 column [kh, kw, C] of output pixel (oy, ox) of image `img` into col, z_x in the padding:
   the whole column filled with z_x first (whole vectors), then each kernel row's taps inside the
   image copied over it as one run (a border pixel's pieces cost more one by one). */
static void mt_mve_im2col_s8(const mt_conv_params *p, const mt_dims *in_d, const int8_t *img, const mt_dims *f_d,
                      int32_t oy, int32_t ox, int8_t *col)
{
    const int32_t c = in_d->c;
    const int32_t run = f_d->w * c;
    const int32_t x0 = ox * p->stride_w - p->pad_left;
    const int32_t left = x0 < 0 ? -x0 : 0;
    const int32_t end = x0 + f_d->w > in_d->w ? in_d->w - x0 : f_d->w;
    int32_t ky;
    mt_mve_fill(col, p->input_zero_point, f_d->h * run);
    for (ky = 0; ky < f_d->h; ky++) {
        const int32_t iy = oy * p->stride_h - p->pad_top + ky;
        if (iy >= 0 && iy < in_d->h) {
            mt_mve_copy(col + ky * run + left * c, img + (iy * in_d->w + x0 + left) * c, (end - left) * c);
        }
    }
}

/*
 * The columns of `ncols` output pixels from flat pixel `px` (raster order over batch, rows,
 * columns) into col (k bytes each). A run of pixels of one output row whose windows lie inside
 * the image is copied kernel row by kernel row, pixel after pixel (one predicated load and store
 * each when kw * C <= 16); border pixels go through mt_mve_im2col_s8.
 */
static void mt_mve_im2col_pixels(const mt_conv_params *p, const mt_dims *in_d, const int8_t *input, const mt_dims *f_d,
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
            mt_mve_im2col_s8(p, in_d, img, f_d, oy, ox, col + j * k);
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
   then every block of output channels runs over them; with acc_min (FQT) the channels' extremes
   widen to every accumulator. */
MT_INLINE void mt_mve_conv(const mt_conv_params *p, const mt_per_channel_quant *q, const mt_dims *in_d,
                           const int8_t *input, const mt_dims *f_d, const int8_t *filter, const int32_t *bias,
                           const mt_dims *out_d, int8_t *output, int8_t *col, int32_t ncols_max, int32_t *acc_min,
                           int32_t *acc_max)
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
            mt_mve_im2col_pixels(p, in_d, input, f_d, out_d, px, ncols, col);
            if (acc_min) {
                mt_mve_gemm_range(&b, filter + o0 * k, k, k, col, ncols, k, q, o0, nb, p->output_zero_point,
                                  p->act_min, p->act_max, output + px * o_n + o0, o_n, acc_min, acc_max);
            } else {
                mt_mve_gemm(&b, filter + o0 * k, k, k, col, ncols, k, q, o0, nb, p->output_zero_point, p->act_min,
                            p->act_max, output + px * o_n + o0, o_n);
            }
        }
    }
}

#endif /* MT_MVE */

#endif /* MT_MVE_CONV_H */
