/*
 * Weight and bias gradients of a grouped conv (depthwise included), accumulated into int32
 * (Python twin: fqt_kernels.conv2d_bwd_w_acc in mode "int", groups > 1, and bias_grad_acc).
 * DSP twin of train/fqt/mt_grouped_conv2d_bwd_w_s8_s8.c, bit-exact with it; grouped layers that
 * are not depthwise, and cores without DSP, run the reference body
 * (mt_grouped_conv2d_bwd_w_s8_s8_ref.h).
 *
 * Depthwise: g[c, i, j] sums e[p, c] * (x[p + (i, j), c] - z_x) over the output positions p, so
 * one SMLAD takes two positions of one channel. Four channels go together: per output row and
 * block of up to 2 * MT_BWW_PAIRS positions, the errors become, per pair of positions (ox, ox + 1),
 * four words (e[ox, c], e[ox + 1, c]) on the stack (the bias sums come from the same words);
 * then per tap (i, j) the positions whose input (iy, ix) is inside the image run in pairs: two
 * word loads of the four input channels, two PKH and four SXTAB16 give (x - z_x) at both
 * positions per channel, and four SMLAD add them into four register sums, which go into g once
 * per row and tap. A position left without a partner at either end of the valid range, and the
 * channels past the last quad, take the plain loop.
 * NOTE: each g element sums one product per output position, |e * (x - z_x)| <= 127 * 255, so
 * int32 holds batch * positions <= 66311 products (the exporter checks the bound) in any order;
 * SMLAD wraps like int32 and never needs to.
 */
#include "mt_arch.h"
#include "mt_grouped_conv2d_bwd_w_s8_s8_ref.h"

#if MT_DSP
#define MT_BWW_PAIRS 16 /* position pairs per error block: 16 x 4 words = 256 B of stack */

/* Sum of the two signed 16-bit halves of v added to acc (SMLAD with (1, 1)). */
MT_INLINE int32_t bwd_w_add_halves(int32_t v, int32_t acc)
{
    return mt_smlad(v, 0x00010001, acc);
}

/* The valid output columns [lo, hi) of tap column j: ox * s - pad + j inside [0, w). */
MT_INLINE void bwd_w_tap_columns(int32_t j, int32_t s, int32_t pad, int32_t w, int32_t ox0, int32_t ox1, int32_t *lo,
                           int32_t *hi)
{
    const int32_t first = pad - j > 0 ? (pad - j + s - 1) / s : 0;
    const int32_t last = (w - 1 + pad - j) >= 0 ? (w - 1 + pad - j) / s + 1 : 0;
    *lo = first > ox0 ? first : ox0;
    *hi = last < ox1 ? last : ox1;
}

/* One output position's products of four channels: e (errors) and x (inputs) at c0. */
MT_INLINE void bwd_w_single_position(const int8_t *e, const int8_t *x, int32_t zx, int32_t *a0, int32_t *a1,
                                     int32_t *a2, int32_t *a3)
{
    *a0 += (int32_t)e[0] * ((int32_t)x[0] - zx);
    *a1 += (int32_t)e[1] * ((int32_t)x[1] - zx);
    *a2 += (int32_t)e[2] * ((int32_t)x[2] - zx);
    *a3 += (int32_t)e[3] * ((int32_t)x[3] - zx);
}

/* Channels [c0, c0 + 4) of one depthwise layer (see the file comment). */
static MT_NOINLINE void bwd_w_quad(const mt_conv_params *p,
                                   const mt_dims *in_d,
                                   const int8_t *input,
                                   const mt_dims *out_d,
                                   const int8_t *e,
                                   const mt_dims *f_d,
                                   int32_t *grad,
                                   int32_t *grad_bias,
                                   int32_t c0)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c;
    const int32_t kh = f_d->h, kw = f_d->w, kk = kh * kw;
    const int32_t ho = out_d->h, wo = out_d->w, sh = p->stride_h, sw = p->stride_w;
    const int32_t zx = p->input_zero_point;
    const int32_t zz = (int32_t)(((uint32_t)(-zx) & 0xFFFFu) | ((uint32_t)(-zx) << 16));
    const int32_t step = sw * c_n, step2 = 2 * sw * c_n; /* input bytes from a position to the next, and two on */
    int32_t ep[4 * MT_BWW_PAIRS];
    int32_t b0 = 0, b1 = 0, b2 = 0, b3 = 0;
    int32_t n, oy, ox0;
    for (n = 0; n < in_d->n; ++n) {
        for (oy = 0; oy < ho; ++oy) {
            const int8_t *erow = e + (n * ho + oy) * wo * c_n + c0;
            for (ox0 = 0; ox0 < wo; ox0 += 2 * MT_BWW_PAIRS) {
                const int32_t ox1 = ox0 + 2 * MT_BWW_PAIRS < wo ? ox0 + 2 * MT_BWW_PAIRS : wo;
                int32_t q, i;
                /* the block's errors as position pairs (ox0 + 2q, ox0 + 2q + 1), and the bias sums */
                for (q = 0; ox0 + 2 * q + 1 < ox1; ++q) {
                    const int32_t va = mt_read_s8x4(erow + (ox0 + 2 * q) * c_n);
                    const int32_t vb = mt_read_s8x4(erow + (ox0 + 2 * q + 1) * c_n);
                    const int32_t lo = mt_pkhbt(va, vb), hi = mt_pkhtb(va, vb);
                    ep[4 * q] = mt_sxtb16(lo);
                    ep[4 * q + 1] = mt_sxtb16_ror8(lo);
                    ep[4 * q + 2] = mt_sxtb16(hi);
                    ep[4 * q + 3] = mt_sxtb16_ror8(hi);
                    b0 = bwd_w_add_halves(ep[4 * q], b0);
                    b1 = bwd_w_add_halves(ep[4 * q + 1], b1);
                    b2 = bwd_w_add_halves(ep[4 * q + 2], b2);
                    b3 = bwd_w_add_halves(ep[4 * q + 3], b3);
                }
                if ((ox1 - ox0) & 1) {
                    const int8_t *pe = erow + (ox1 - 1) * c_n;
                    b0 += pe[0];
                    b1 += pe[1];
                    b2 += pe[2];
                    b3 += pe[3];
                }
                /* the tap columns some position of the block reaches */
                const int32_t j_lo = p->pad_left - (ox1 - 1) * sw > 0 ? p->pad_left - (ox1 - 1) * sw : 0;
                const int32_t j_hi = w + p->pad_left - ox0 * sw < kw ? w + p->pad_left - ox0 * sw : kw;
                for (i = 0; i < kh; ++i) {
                    const int32_t iy = oy * sh - p->pad_top + i;
                    const int8_t *xrow;
                    int32_t j;
                    if (iy < 0 || iy >= h) {
                        continue; /* padding rows: real 0 */
                    }
                    xrow = input + (n * h + iy) * w * c_n + c0;
                    for (j = j_lo; j < j_hi; ++j) {
                        int32_t *g = grad + c0 * kk + i * kw + j;
                        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                        int32_t lo, hi, ox;
                        bwd_w_tap_columns(j, sw, p->pad_left, w, ox0, ox1, &lo, &hi);
                        if (lo < hi && ((lo - ox0) & 1)) { /* odd start: no partner before it */
                            bwd_w_single_position(erow + lo * c_n, xrow + (lo * sw - p->pad_left + j) * c_n, zx, &a0,
                                                  &a1, &a2, &a3);
                            ++lo;
                        }
                        if (hi - lo >= 2) { /* the pairs (ox, ox + 1) from lo: two positions per SMLAD */
                            const int8_t *px = xrow + (lo * sw - p->pad_left + j) * c_n;
                            const int32_t *pq = ep + 2 * (lo - ox0);
                            const int32_t *end = pq + 4 * ((hi - lo) >> 1);
                            for (; pq < end; pq += 4, px += step2) {
                                const int32_t va = mt_read_s8x4(px), vb = mt_read_s8x4(px + step);
                                const int32_t xl = mt_pkhbt(va, vb), xh = mt_pkhtb(va, vb);
                                a0 = mt_smlad(mt_sxtab16(zz, xl), pq[0], a0);
                                a1 = mt_smlad(mt_sxtab16_ror8(zz, xl), pq[1], a1);
                                a2 = mt_smlad(mt_sxtab16(zz, xh), pq[2], a2);
                                a3 = mt_smlad(mt_sxtab16_ror8(zz, xh), pq[3], a3);
                            }
                        }
                        if (hi > lo && ((hi - lo) & 1)) { /* odd end */
                            ox = hi - 1;
                            bwd_w_single_position(erow + ox * c_n, xrow + (ox * sw - p->pad_left + j) * c_n, zx, &a0,
                                                  &a1, &a2, &a3);
                        }
                        g[0] += a0;
                        g[kk] += a1;
                        g[2 * kk] += a2;
                        g[3 * kk] += a3;
                    }
                }
            }
        }
    }
    grad_bias[c0] += b0;
    grad_bias[c0 + 1] += b1;
    grad_bias[c0 + 2] += b2;
    grad_bias[c0 + 3] += b3;
}

/* One channel c past the last quad: the reference arithmetic. */
static void bwd_w_single(const mt_conv_params *p,
                      const mt_dims *in_d,
                      const int8_t *input,
                      const mt_dims *out_d,
                      const int8_t *e,
                      const mt_dims *f_d,
                      int32_t *grad,
                      int32_t *grad_bias,
                      int32_t c)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c, kh = f_d->h, kw = f_d->w;
    const int32_t zx = p->input_zero_point;
    int32_t n, oy, ox, i, j;
    for (n = 0; n < in_d->n; ++n) {
        for (oy = 0; oy < out_d->h; ++oy) {
            for (ox = 0; ox < out_d->w; ++ox) {
                const int32_t ev = e[((n * out_d->h + oy) * out_d->w + ox) * c_n + c];
                grad_bias[c] += ev;
                for (i = 0; i < kh; ++i) {
                    const int32_t iy = oy * p->stride_h - p->pad_top + i;
                    if (iy < 0 || iy >= h) {
                        continue;
                    }
                    for (j = 0; j < kw; ++j) {
                        const int32_t ix = ox * p->stride_w - p->pad_left + j;
                        if (ix >= 0 && ix < w) {
                            grad[(c * kh + i) * kw + j] += ev * ((int32_t)input[((n * h + iy) * w + ix) * c_n + c] - zx);
                        }
                    }
                }
            }
        }
    }
}
#endif /* MT_DSP */

mt_status mt_grouped_conv2d_bwd_w_s8_s8(const mt_conv_params *params,
                                        const mt_dims *input_dims,
                                        const int8_t *input,
                                        const mt_dims *output_dims,
                                        const int8_t *e,
                                        const mt_dims *filter_dims,
                                        int32_t *grad,
                                        int32_t *grad_bias)
{
#if MT_DSP
    if (params && input_dims && input && output_dims && e && filter_dims && grad && grad_bias &&
        filter_dims->c == 1 && params->groups == input_dims->c && filter_dims->n == input_dims->c &&
        output_dims->c == input_dims->c && params->stride_h >= 1 && params->stride_w >= 1) {
        int32_t c;
        for (c = 0; c + 4 <= input_dims->c; c += 4) {
            bwd_w_quad(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias, c);
        }
        for (; c < input_dims->c; ++c) {
            bwd_w_single(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias, c);
        }
        return MT_OK;
    }
#endif /* MT_DSP */
    return mt_grouped_conv2d_bwd_w_s8_s8_ref(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias);
}
