/*
 * mcutrain runtime: mt_conv2d_fwd_s8, the plain and grouped 2-d convolution (see mt_nn.h).
 *
 * DSP twin of nn/mt_conv2d_fwd_s8.c, bit-exact with it: im2col of seven output pixels at a time
 * into int16 columns (centred, SMLAD order, interleaved), then the 1x7-blocked GEMM of
 * dsp/mt_mat_mult_s8_s16.c; the last pixels (fewer than seven) and layers with
 * K > MT_CONV_WIDE_K_MAX go two at a time through the 2x2-blocked GEMM. Without scratch, or on
 * a core without DSP, it runs the reference body (mt_conv_ref.h). Both compute the same exact
 * integer sums, so the outputs are identical.
 */
#include "mt_conv_ref.h"
#include "mt_fixedpoint.h"
#include "mt_nn.h"
#include "mt_support.h"

/* NOTE: K bound of the seven-column block: its scratch, 14 K bytes, stays within 3.5 KB. */
#define MT_CONV_WIDE_K_MAX 256

#if MT_DSP
/* Columns per im2col block for reduction length k (mirrored in mcutrain.plan.lifetimes). */
static int32_t block_cols(int32_t k)
{
    return k <= MT_CONV_WIDE_K_MAX ? MT_GEMM_COLS : 2;
}
#endif /* MT_DSP */

int32_t mt_conv2d_fwd_s8_get_buffer_size(const mt_dims *filter_dims)
{
#if MT_DSP
    /* the interleaved int16 columns of one block; channel counts that are not a multiple of four
       also need one plain int16 column to gather into before the reordering scatter */
    const int32_t k = filter_dims->h * filter_dims->w * filter_dims->c;
    return 2 * block_cols(k) * k + ((filter_dims->c & 3) != 0 ? 2 * k : 0);
#else  /* !MT_DSP */
    (void)filter_dims;
    return 0;
#endif /* MT_DSP */
}

#if MT_DSP

/*
 * The centred int16 column (SMLAD order) of output pixel (n, oy, ox), channels of group g, into
 * slot `slot` of the interleaved `ncols`-column buffer (mt_support.h). Padding: zeros.
 * `plain` ([k] int16) is only used when the group's channel count is not a multiple of four.
 */
static void im2col_s16(const mt_conv_params *p,
                       const mt_dims *in_d,
                       const int8_t *input,
                       const mt_dims *f_d,
                       int32_t n,
                       int32_t oy,
                       int32_t ox,
                       int32_t g,
                       int16_t *cols,
                       int16_t *plain,
                       int32_t ncols,
                       int32_t slot)
{
    const int32_t cg = f_d->c;
    const int32_t zx = p->input_zero_point;
    const int32_t k4 = (f_d->h * f_d->w * cg) & ~3;
    /* -z_x in both halves; SXTAB16 adds it to two sign-extended bytes at once */
    const int32_t off2 = (int32_t)(((uint32_t)(-zx) & 0xFFFFu) | ((uint32_t)(-zx) << 16));
    int32_t e = 0; /* element index of the run's first value in the plain column */
    int32_t ky, kx, i;
    for (ky = 0; ky < f_d->h; ky++) {
        const int32_t iy = oy * p->stride_h - p->pad_top + ky;
        const int32_t ix0 = ox * p->stride_w - p->pad_left;
        /* a kernel row inside the input of an ungrouped conv is one contiguous run of kw * C
           values; otherwise the row goes tap by tap (runs of Cg values, or padding) */
        const int whole = iy >= 0 && iy < in_d->h && ix0 >= 0 && ix0 + f_d->w <= in_d->w && cg == in_d->c;
        const int32_t taps = whole ? 1 : f_d->w;
        const int32_t run = whole ? f_d->w * cg : cg;
        for (kx = 0; kx < taps; kx++) {
            const int32_t ix = ix0 + kx;
            const int pad = iy < 0 || iy >= in_d->h || ix < 0 || ix >= in_d->w;
            const int8_t *x = pad ? input : input + ((n * in_d->h + iy) * in_d->w + ix) * in_d->c + g * cg;
            if ((cg & 3) == 0) {
                /* groups of four stay inside one run: write them directly in SMLAD order */
                int16_t *d = cols + ncols * e + 4 * slot;
                for (i = 0; i < run; i += 4) {
                    if (pad) {
                        mt_write_s16x2(d, 0);
                        mt_write_s16x2(d + 2, 0);
                    } else {
                        const int32_t v = mt_read_s8x4(x + i);
                        mt_write_s16x2(d, mt_sxtab16(off2, v));
                        mt_write_s16x2(d + 2, mt_sxtab16_ror8(off2, v));
                    }
                    d += 4 * ncols;
                }
            } else {
                /* gather in plain order; the scatter below reorders and interleaves */
                for (i = 0; i < run; i++) {
                    plain[e + i] = (int16_t)(pad ? 0 : (int32_t)x[i] - zx);
                }
            }
            e += run;
        }
    }
    if ((cg & 3) != 0) {
        int16_t *d = cols + 4 * slot;
        for (i = 0; i < k4; i += 4) {
            d[0] = plain[i];
            d[1] = plain[i + 2];
            d[2] = plain[i + 1];
            d[3] = plain[i + 3];
            d += 4 * ncols;
        }
        for (i = k4; i < e; i++) {
            cols[ncols * i + slot] = plain[i];
        }
    }
}

static void conv_dsp(const mt_conv_params *p,
                     const mt_per_channel_quant *q,
                     const mt_dims *in_d,
                     const int8_t *input,
                     const mt_dims *f_d,
                     const int8_t *filter,
                     const int32_t *bias,
                     const mt_dims *out_d,
                     int8_t *output,
                     int16_t *cols)
{
    const int32_t k = f_d->h * f_d->w * f_d->c;
    const int32_t opg = f_d->n / p->groups;
    const int32_t pixels = out_d->h * out_d->w;
    const int32_t wide = block_cols(k);
    int16_t *plain = cols + wide * k;
    int32_t n, g, px;
    for (n = 0; n < in_d->n; n++) {
        for (g = 0; g < p->groups; g++) {
            const int8_t *w = filter + g * opg * k;
            mt_gemm_out qo;
            qo.bias = bias + g * opg;
            qo.multiplier = q->multiplier + g * opg;
            qo.shift = q->shift + g * opg;
            qo.zero_point = p->output_zero_point;
            qo.act_min = p->act_min;
            qo.act_max = p->act_max;
            px = 0;
            if (wide == MT_GEMM_COLS) {
                for (; px + MT_GEMM_COLS <= pixels; px += MT_GEMM_COLS) {
                    int32_t j;
                    for (j = 0; j < MT_GEMM_COLS; j++) {
                        im2col_s16(p, in_d, input, f_d, n, (px + j) / out_d->w, (px + j) % out_d->w, g, cols,
                                   plain, MT_GEMM_COLS, j);
                    }
                    mt_mat_mult_s8_s16_7col(w, cols, opg, k, &qo, output + (n * pixels + px) * out_d->c + g * opg,
                                            out_d->c, MT_GEMM_COLS);
                }
            }
            for (; px < pixels; px += 2) {
                /* an odd last pixel fills both slots and writes its outputs twice, identically */
                const int32_t pb = px + 1 < pixels ? px + 1 : px;
                int8_t *y0 = output + (n * pixels + px) * out_d->c + g * opg;
                int8_t *y1 = output + (n * pixels + pb) * out_d->c + g * opg;
                im2col_s16(p, in_d, input, f_d, n, px / out_d->w, px % out_d->w, g, cols, plain, 2, 0);
                im2col_s16(p, in_d, input, f_d, n, pb / out_d->w, pb % out_d->w, g, cols, plain, 2, 1);
                mt_mat_mult_s8_s16_2col(w, cols, opg, k, &qo, y0, y1);
            }
        }
    }
}

#endif /* MT_DSP */

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
#if MT_DSP
    if (ctx && ctx->buf && ctx->size >= mt_conv2d_fwd_s8_get_buffer_size(filter_dims)) {
        conv_dsp(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output,
                 (int16_t *)ctx->buf);
        return MT_OK;
    }
#else  /* !MT_DSP */
    (void)ctx;
#endif /* MT_DSP */
    mt_conv_ref(params, quant, input_dims, input, filter_dims, filter, 0, bias, output_dims, output);
    return MT_OK;
}
