/*
 * Conv weight and bias gradients from the kept int8 input and int8 errors, accumulated in int32
 * (Python twin: fqt_kernels.conv2d_bwd_w_acc and bias_grad_acc in mode "int"; exact in any order).
 * Helium (MVE) twin of train/fqt/mt_conv2d_bwd_w_s8_s8.c, bit-exact with it; the reference loop
 * (mt_conv2d_bwd_w_s8_s8_ref.h) runs where MT_MVE is 0, and one input channel with a 3x3 kernel
 * keeps the DSP twin's registers loop (mt_conv_c1.h).
 *
 * Why a transpose: g[o, k] = sum_p e[p, o] * (x[p, k] - z_x) is a reduction over the output
 * positions p, and VMLADAVA sums sixteen int8 products into one int32 in one instruction. So the
 * errors of 32 positions become, per filter, two 16-byte rows (E^T) and the positions' im2col
 * becomes, per k, two 16-byte rows (X^T, padding stored as z_x), both by VSTRB scatters of
 * sixteen channels at a time; then each g[o, k] of a pair of filters takes one load, two
 * VMLADAVA and one store per 32 positions: about 10 instructions per 64 MACs. The zero point
 * comes off once per filter at the end, sum_p e (x - z_x) = sum_p e x - z_x sum_p e, with the
 * sum of the errors that the bias gradient takes anyway; every partial sum wraps modulo 2^32 and
 * the final one is the reference's exact sum (its bound is in the reference's NOTE). Filters
 * whose 32 errors are all 0 are skipped (exact).
 * mt_conv2d_bwd_w_s8_s8_keep (partial updates) zeroes the kept rows, then runs the same loops over
 * the kept filters only (keep[t] for t, the errors in the full layout).
 */
#include "mt_arch.h"
#include "mt_conv2d_bwd_w_s8_s8_ref.h"
#include "mt_conv_c1.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_mve.h"

#if MT_MVE
#define MVE_BWD_W_KC 64 /* k values per X^T chunk: 2 x 64 x 16 B = 2 KB of stack */
#define MVE_BWD_W_OC 32 /* filters per E^T block: 2 x 32 x 16 B = 1 KB of stack */

/* The filter of block entry i: keep[i] for the kept-filter form, i itself for every filter. */
MT_INLINE int32_t filter_at(const int32_t *keep, int32_t i)
{
    return keep ? keep[i] : i;
}

/* Byte offsets 0, 16, ..., 240: one channel per 16-byte row of a transposed block. */
MT_INLINE uint8x16_t rows16(void)
{
    return vmulq_n_u8(vidupq_n_u8(0, 1), 16);
}

/* Rows [0, n) of one position's X^T column from src (NULL: padding, z_x), 16 channels a VSTRB scatter. */
MT_INLINE void put_run(const int8_t *src, int32_t n, int8x16_t pad, uint8x16_t off, int8_t *dst)
{
    int32_t c;
    for (c = 0; c + 16 <= n; c += 16, dst += 256) {
        vstrbq_scatter_offset_s8(dst, off, src ? vldrbq_s8(src + c) : pad);
    }
    if (c < n) {
        const mve_pred16_t p = vctp8q((uint32_t)(n - c));
        vstrbq_scatter_offset_p_s8(dst, off, src ? vldrbq_z_s8(src + c, p) : pad, p);
    }
}

/*
 * X^T rows [k0, k0 + kc) for the 32 positions of a chunk (win[q]: the input's byte offset of
 * position q's window origin (c_lo included), iy0, ix0: its row and column; valid q < np):
 * xt[(q / 16) * MVE_BWD_W_KC * 16 + (k - k0) * 16 + q % 16] = x[q, k]. The chunk is taps
 * [t0, t1) with channels [c_lo, c_lo + cn) of each. With whole channels, the taps of one kernel
 * row inside the image are one run of bytes in both the input and X^T, so an interior window
 * costs a scatter per 16 bytes of a kernel row, not per tap.
 */
MT_INLINE void fill_x(const int8_t *input, int32_t h, int32_t w, int32_t c_n, int32_t kw, int32_t zx,
                      const int32_t *win, const int32_t *iy0, const int32_t *ix0, int32_t np, int32_t t0,
                      int32_t t1, int32_t cn, int8_t *xt)
{
    const uint8x16_t off = rows16();
    const int8x16_t pad = vdupq_n_s8((int8_t)zx);
    const int32_t i0 = t0 / kw, j0 = t0 % kw, row = w * c_n;
    const int whole_row = cn == c_n && j0 == 0 && t1 - t0 == kw; /* the common chunk */
    const int32_t len = kw * c_n, n16 = len >> 4;
    const mve_pred16_t ptail = vctp8q((uint32_t)(len & 15));
    int32_t q;
    for (q = 0; q < 32; ++q) {
        int8_t *dst = xt + (q >> 4) * MVE_BWD_W_KC * 16 + (q & 15);
        const int32_t iy = iy0[q] + i0, ix = ix0[q];
        const int8_t *src = input + win[q] + i0 * row;
        const int inside = ix >= 0 && ix + kw <= w;
        int32_t t = t0, j = j0, y;
        if (whole_row && q < np && inside && (uint32_t)iy < (uint32_t)h) { /* an interior window's row */
            int32_t c;
            for (c = n16; c > 0; --c, src += 16, dst += 256) {
                vstrbq_scatter_offset_s8(dst, off, vldrbq_s8(src));
            }
            if (len & 15) {
                vstrbq_scatter_offset_p_s8(dst, off, vldrbq_z_s8(src, ptail), ptail);
            }
            continue;
        }
        if (q >= np) {
            put_run(NULL, (t1 - t0) * cn, pad, off, dst);
            continue;
        }
        for (y = iy; t < t1; ++y, src += row, j = 0) {
            const int32_t jn = t1 - t < kw - j ? t1 - t : kw - j; /* taps left in this kernel row */
            if ((uint32_t)y >= (uint32_t)h) {
                put_run(NULL, jn * cn, pad, off, dst);
            } else if (cn == c_n && inside) {
                put_run(src + j * c_n, jn * cn, pad, off, dst);
            } else {
                int32_t u;
                for (u = 0; u < jn; ++u) {
                    const int valid = (uint32_t)(ix + j + u) < (uint32_t)w;
                    put_run(valid ? src + (j + u) * c_n : NULL, cn, pad, off, dst + u * cn * 16);
                }
            }
            dst += jn * cn * 16;
            t += jn;
        }
    }
}

/*
 * E^T rows of filters [oc0, oc0 + ocn) (keep[] names them when given) for the chunk's positions
 * [p0, p0 + np): et[(q / 16) * MVE_BWD_W_OC * 16 + o * 16 + q % 16] = e[p0 + q, filter o], 0 past
 * np; each filter's error sum is added to its bias gradient and to esum[o], nz[o] = any nonzero.
 */
static MT_NOINLINE void bwd_w_fill_e(const int8_t *e, int32_t o_n, const int32_t *keep, int32_t oc0, int32_t ocn, int32_t p0,
                      int32_t np, int8_t *et, int32_t *grad_bias, int32_t *esum, uint8_t *nz)
{
    int32_t q, o;
    if (np < 32) {
        for (q = 0; q < 2 * MVE_BWD_W_OC * 16; q += 16) {
            vstrbq_s8(et + q, vdupq_n_s8(0));
        }
    }
    if (!keep) {
        const uint8x16_t off = rows16();
        for (q = 0; q < np; ++q) {
            int8_t *col = et + (q >> 4) * MVE_BWD_W_OC * 16 + (q & 15);
            const int8_t *src = e + (p0 + q) * o_n + oc0;
            for (o = 0; o < ocn; o += 16) {
                const mve_pred16_t p = vctp8q((uint32_t)(ocn - o));
                vstrbq_scatter_offset_p_s8(col + o * 16, off, vldrbq_z_s8(src + o, p), p);
            }
        }
    } else {
        for (q = 0; q < np; ++q) {
            int8_t *col = et + (q >> 4) * MVE_BWD_W_OC * 16 + (q & 15);
            const int8_t *src = e + (p0 + q) * o_n;
            for (o = 0; o < ocn; ++o) {
                col[o * 16] = src[keep[oc0 + o]];
            }
        }
    }
    for (o = 0; o < ocn; ++o) {
        const int8x16_t lo = vldrbq_s8(et + o * 16), hi = vldrbq_s8(et + (MVE_BWD_W_OC + o) * 16);
        const int32_t s = vaddvaq_s8(vaddvq_s8(lo), hi);
        grad_bias[filter_at(keep, oc0 + o)] += s;
        esum[o] += s;
        nz[o] = (uint8_t)(vmaxvq_u8(0, vreinterpretq_u8_s8(vorrq_s8(lo, hi))) != 0);
    }
}

/* g0[k] (and g1[k] when g1) += the 32-position dots of X^T row k with the filters' E^T rows. */
static MT_NOINLINE void bwd_w_dots(const int8_t *xt, int32_t kc, int32_t halves, const int8_t *e0, int32_t *g0, const int8_t *e1,
                    int32_t *g1)
{
    const int8_t *xa = xt, *xb = xt + MVE_BWD_W_KC * 16;
    const int8x16_t a0 = vldrbq_s8(e0), b0 = vldrbq_s8(e0 + MVE_BWD_W_OC * 16);
    int32_t k;
    if (g1) {
        const int8x16_t a1 = vldrbq_s8(e1), b1 = vldrbq_s8(e1 + MVE_BWD_W_OC * 16);
        if (halves == 2) {
            for (k = 0; k < kc; ++k, xa += 16, xb += 16) {
                const int8x16_t va = vldrbq_s8(xa), vb = vldrbq_s8(xb);
                g0[k] = vmladavaq_s8(vmladavaq_s8(g0[k], a0, va), b0, vb);
                g1[k] = vmladavaq_s8(vmladavaq_s8(g1[k], a1, va), b1, vb);
            }
        } else {
            for (k = 0; k < kc; ++k, xa += 16) {
                const int8x16_t va = vldrbq_s8(xa);
                g0[k] = vmladavaq_s8(g0[k], a0, va);
                g1[k] = vmladavaq_s8(g1[k], a1, va);
            }
        }
    } else if (halves == 2) {
        for (k = 0; k < kc; ++k, xa += 16, xb += 16) {
            g0[k] = vmladavaq_s8(vmladavaq_s8(g0[k], a0, vldrbq_s8(xa)), b0, vldrbq_s8(xb));
        }
    } else {
        for (k = 0; k < kc; ++k, xa += 16) {
            g0[k] = vmladavaq_s8(g0[k], a0, vldrbq_s8(xa));
        }
    }
}

/* The Helium loop over the filters keep[0..n) (keep NULL: 0..n), errors e[position, O]. */
MT_INLINE void bwd_w_mve(const mt_conv_params *params,
                         const int32_t *keep,
                         int32_t n_keep,
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
    const int32_t kk = kh * kw * c_n, npos = input_dims->n * ho * wo;
    const int32_t zx = params->input_zero_point;
    /* a chunk is whole kernel rows when one fits (a window's row is then one run for fill_x), else
       whole taps when a tap's channels fit, else a run of one tap's channels */
    const int32_t taps_per = kw * c_n <= MVE_BWD_W_KC ? MVE_BWD_W_KC / (kw * c_n) * kw
                             : c_n <= MVE_BWD_W_KC  ? MVE_BWD_W_KC / c_n
                                                    : 1;
    const int32_t c_step = c_n <= MVE_BWD_W_KC ? c_n : MVE_BWD_W_KC;
    int8_t xt[2 * MVE_BWD_W_KC * 16];
    int8_t et[2 * MVE_BWD_W_OC * 16];
    int32_t esum[MVE_BWD_W_OC];
    uint8_t nz[MVE_BWD_W_OC];
    int32_t oc0;
    for (oc0 = 0; oc0 < n_keep; oc0 += MVE_BWD_W_OC) {
        const int32_t ocn = n_keep - oc0 < MVE_BWD_W_OC ? n_keep - oc0 : MVE_BWD_W_OC;
        int32_t o, p0;
        for (o = 0; o < ocn; ++o) {
            esum[o] = 0;
        }
        for (p0 = 0; p0 < npos; p0 += 32) {
            const int32_t np = npos - p0 < 32 ? npos - p0 : 32;
            int32_t win[32], iy0[32], ix0[32];
            int32_t q, t0, any = 0;
            bwd_w_fill_e(e, o_n, keep, oc0, ocn, p0, np, et, grad_bias, esum, nz);
            for (o = 0; o < ocn; ++o) {
                any |= nz[o];
            }
            if (!any) {
                continue; /* exact: zero errors add nothing */
            }
            for (q = 0; q < np; ++q) { /* window origins, walking (sample, row, column) */
                const int32_t p = p0 + q, y = p / wo % ho;
                iy0[q] = y * params->stride_h - params->pad_top;
                ix0[q] = (p % wo) * params->stride_w - params->pad_left;
                win[q] = ((p / (ho * wo) * h + iy0[q]) * w + ix0[q]) * c_n;
            }
            for (t0 = 0; t0 < kh * kw; t0 += taps_per) {
                const int32_t t1 = t0 + taps_per < kh * kw ? t0 + taps_per : kh * kw;
                int32_t c_lo;
                for (c_lo = 0; c_lo < c_n; c_lo += c_step) {
                    const int32_t cn = c_n - c_lo < c_step ? c_n - c_lo : c_step;
                    const int32_t k0 = t0 * c_n + c_lo, kc = (t1 - t0) * cn;
                    int32_t pend = -1; /* a filter with errors waiting for a partner */
                    fill_x(input + c_lo, h, w, c_n, kw, zx, win, iy0, ix0, np, t0, t1, cn, xt);
                    for (o = 0; o < ocn; ++o) {
                        int32_t *g = grad + filter_at(keep, oc0 + o) * kk + k0;
                        if (!nz[o]) {
                            continue;
                        }
                        if (pend < 0) {
                            pend = o;
                            continue;
                        }
                        bwd_w_dots(xt, kc, np > 16 ? 2 : 1, et + pend * 16,
                             grad + filter_at(keep, oc0 + pend) * kk + k0, et + o * 16, g);
                        pend = -1;
                    }
                    if (pend >= 0) {
                        bwd_w_dots(xt, kc, np > 16 ? 2 : 1, et + pend * 16,
                             grad + filter_at(keep, oc0 + pend) * kk + k0, NULL, NULL);
                    }
                }
            }
        }
        for (o = 0; o < ocn; ++o) { /* the zero point: - z_x * sum_p e over the whole reduction */
            const int32x4_t corr = vdupq_n_s32((int32_t)((uint32_t)zx * (uint32_t)esum[o]));
            int32_t *g = grad + filter_at(keep, oc0 + o) * kk;
            int32_t k;
            if (esum[o] == 0 || zx == 0) {
                continue;
            }
            for (k = 0; k < kk; k += 4) {
                const mve_pred16_t p = vctp32q((uint32_t)(kk - k));
                vstrwq_p_s32(g + k, vsubq_s32(vldrwq_z_s32(g + k, p), corr), p);
            }
        }
    }
}

/* The dense kernel's filters: one input channel and a 3x3 kernel take mt_conv_c1.h's loop. */
MT_INLINE void bwd_w_dense_mve(const mt_conv_params *params,
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
    if (mt_conv_c1_bwd_w(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias)) {
        return; /* one input channel, 3x3: the nine sums in registers (mt_conv_c1.h) */
    }
    bwd_w_mve(params, keep, n, input_dims, input, output_dims, e, filter_dims, grad, grad_bias);
}

static const mt_conv_bwd_w_filters_fn dense_filters = bwd_w_dense_mve;
static const mt_conv_bwd_w_filters_fn kept_filters = bwd_w_mve;
#else  /* !MT_MVE */
static const mt_conv_bwd_w_filters_fn dense_filters = mt_conv2d_bwd_w_s8_s8_filters_ref;
static const mt_conv_bwd_w_filters_fn kept_filters = mt_conv2d_bwd_w_s8_s8_filters_ref;
#endif /* MT_MVE */

mt_status mt_conv2d_bwd_w_s8_s8(const mt_conv_params *params,
                                const mt_dims *input_dims,
                                const int8_t *input,
                                const mt_dims *output_dims,
                                const int8_t *e,
                                const mt_dims *filter_dims,
                                int32_t *grad,
                                int32_t *grad_bias)
{
    return mt_conv2d_bwd_w_s8_s8_with(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias,
                                      dense_filters);
}

mt_status mt_conv2d_bwd_w_s8_s8_keep(const mt_conv_params *params,
                                     const int32_t *keep,
                                     int32_t n_keep,
                                     const mt_dims *input_dims,
                                     const int8_t *input,
                                     const mt_dims *output_dims,
                                     const int8_t *e,
                                     const mt_dims *filter_dims,
                                     int32_t *grad,
                                     int32_t *grad_bias)
{
    return mt_conv2d_bwd_w_s8_s8_keep_with(params, keep, n_keep, input_dims, input, output_dims, e, filter_dims,
                                           grad, grad_bias, kept_filters);
}
