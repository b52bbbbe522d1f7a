/*
 * Weight and bias gradients of a grouped conv (depthwise included), accumulated into int32
 * (Python twin: fqt_kernels.conv2d_bwd_w_acc in mode "int", groups > 1, and bias_grad_acc).
 * DSP twin of train/fqt/mt_grouped_conv2d_bwd_w_s8_s8.c, bit-exact with it; grouped layers that
 * are not depthwise, kernels over MT_BWW_KK taps or MT_BWW_KW columns, and cores without DSP, run
 * the reference body (mt_grouped_conv2d_bwd_w_s8_s8_ref.h).
 *
 * Depthwise: g[c, i, j] sums e[p, c] * (x[p + (i, j), c] - z_x) over the output positions p, so
 * one SMLAD takes two positions of one channel. Four channels go together: per output row and
 * block of up to 2 * MT_BWW_PAIRS positions, the errors become, per pair of positions (ox, ox + 1),
 * four words (e[ox, c], e[ox + 1, c]) on the stack (an odd last position with a zero partner; the
 * bias sums come from the same words). The valid output columns of each tap column are found once
 * per layer, and once per block each tap column gets a descriptor (bwd_w_block_taps), so a tap
 * runs without a division or a per-position test: its pairs in one loop (two word loads of the
 * four input channels, two PKH and four SXTAB16 give (x - z_x) at both positions per channel,
 * four SMLAD add them), a range that starts or ends on an odd position with one more pair whose
 * missing partner is an input of z_x (x - z_x = 0). The quad's sums live in a tap-major block
 * on the stack, added into g once per quad; channels past the last quad take the plain loop.
 * NOTE: each g element sums one product per output position, |e * (x - z_x)| <= 127 * 255, so
 * int32 holds batch * positions <= 66311 products (the exporter checks the bound) in any order;
 * SMLAD wraps like int32 and never needs to.
 */
#include "mt_arch.h"
#include "mt_grouped_conv2d_bwd_w_s8_s8_ref.h"

#if MT_DSP
#define MT_BWW_PAIRS 16 /* position pairs per error block: 16 x 4 words = 256 B of stack */
#define MT_BWW_KW 16    /* the widest kernel the twin takes (its tap column ranges are on the stack) */
#define MT_BWW_KK 49    /* the most taps it takes: 7x7 (the quad's sums, 4 x 49 words, are on the stack) */

/* Sum of the two signed 16-bit halves of v added to acc (SMLAD with (1, 1)). */
MT_INLINE int32_t bwd_w_add_halves(int32_t v, int32_t acc)
{
    return mt_smlad(v, 0x00010001, acc);
}

/* The four error-pair words of positions (ox, ox + 1) from their int8 words va, vb (see the file comment). */
MT_INLINE void bwd_w_error_pair(int32_t va, int32_t vb, int32_t *pq)
{
    const int32_t lo = mt_pkhbt(va, vb), hi = mt_pkhtb(va, vb);
    pq[0] = mt_sxtb16(lo);
    pq[1] = mt_sxtb16_ror8(lo);
    pq[2] = mt_sxtb16(hi);
    pq[3] = mt_sxtb16_ror8(hi);
}

/* Two positions' products of four channels: va, vb their input words, pq their error pairs;
 * zz holds -z_x in both halves, so SXTAB16 gives x - z_x. */
MT_INLINE void bwd_w_pair(int32_t va, int32_t vb, const int32_t *pq, int32_t zz, int32_t *a0, int32_t *a1,
                          int32_t *a2, int32_t *a3)
{
    const int32_t xl = mt_pkhbt(va, vb), xh = mt_pkhtb(va, vb);
    *a0 = mt_smlad(mt_sxtab16(zz, xl), pq[0], *a0);
    *a1 = mt_smlad(mt_sxtab16_ror8(zz, xl), pq[1], *a1);
    *a2 = mt_smlad(mt_sxtab16(zz, xh), pq[2], *a2);
    *a3 = mt_smlad(mt_sxtab16_ror8(zz, xh), pq[3], *a3);
}

/* The whole pairs [pq, end) of one tap, two positions per SMLAD; returns px past them. The native
 * build runs it as one loop of 18 instructions per 8 MACs (13 registers: GCC spilled its sums). */
MT_INLINE const int8_t *bwd_w_pairs(const int8_t *px, const int32_t *pq, const int32_t *end, int32_t step,
                                    int32_t zz, int32_t *a0, int32_t *a1, int32_t *a2, int32_t *a3)
{
#if defined(MT_DSP_NATIVE)
    int32_t s0 = *a0, s1 = *a1, s2 = *a2, s3 = *a3, t0, t1, t2, t3;
    __asm__("1:\n\t"
            "ldr %[t0], [%[px]]\n\t"
            "ldr %[t1], [%[px], %[st]]\n\t"
            "add %[px], %[px], %[st], lsl #1\n\t"
            "pkhbt %[t2], %[t0], %[t1], lsl #16\n\t"
            "pkhtb %[t1], %[t1], %[t0], asr #16\n\t"
            "sxtab16 %[t0], %[zz], %[t2]\n\t"
            "sxtab16 %[t2], %[zz], %[t2], ror #8\n\t"
            "ldr %[t3], [%[pq]], #16\n\t"
            "smlad %[s0], %[t0], %[t3], %[s0]\n\t"
            "ldr %[t3], [%[pq], #-12]\n\t"
            "smlad %[s1], %[t2], %[t3], %[s1]\n\t"
            "sxtab16 %[t0], %[zz], %[t1]\n\t"
            "sxtab16 %[t1], %[zz], %[t1], ror #8\n\t"
            "ldrd %[t2], %[t3], [%[pq], #-8]\n\t"
            "smlad %[s2], %[t0], %[t2], %[s2]\n\t"
            "smlad %[s3], %[t1], %[t3], %[s3]\n\t"
            "cmp %[pq], %[end]\n\t"
            "bne 1b"
            : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3), [px] "+r"(px), [pq] "+r"(pq),
              [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3)
            : [end] "r"(end), [st] "r"(step), [zz] "r"(zz)
            : "cc", "memory");
    *a0 = s0;
    *a1 = s1;
    *a2 = s2;
    *a3 = s3;
#else
    for (; pq < end; pq += 4, px += 2 * step) {
        bwd_w_pair(mt_read_s8x4(px), mt_read_s8x4(px + step), pq, zz, a0, a1, a2, a3);
    }
#endif
    return px;
}

/* The valid output columns [lo, hi) of each tap column j: ox * s - pad + j inside [0, w), ox in [0, wo). */
static void bwd_w_tap_columns(const mt_conv_params *p, int32_t w, int32_t wo, int32_t kw, int32_t *lo, int32_t *hi)
{
    const int32_t s = p->stride_w, pad = p->pad_left;
    int32_t j;
    for (j = 0; j < kw; ++j) {
        const int32_t first = pad - j > 0 ? (pad - j + s - 1) / s : 0;
        const int32_t last = (w - 1 + pad - j) >= 0 ? (w - 1 + pad - j) / s + 1 : 0;
        lo[j] = first;
        hi[j] = last < wo ? last : wo;
    }
}

/* Per tap column j of the block [ox0, ox1), four words: the input byte offset of its first valid
 * position from the row's first input, the word offsets in the error pairs of its first and
 * past-its-last whole pair, and its ends (bit 0: an odd start, bit 1: an odd end; -1: no position). */
static void bwd_w_block_taps(int32_t ox0, int32_t ox1, int32_t kw, int32_t step, int32_t pad, int32_t c_n,
                             const int32_t *tap_lo, const int32_t *tap_hi, int32_t *d)
{
    int32_t j;
    for (j = 0; j < kw; ++j, d += 4) {
        const int32_t lo = tap_lo[j] > ox0 ? tap_lo[j] : ox0;
        const int32_t hi = tap_hi[j] < ox1 ? tap_hi[j] : ox1;
        const int32_t odd_start = (lo - ox0) & 1;
        d[0] = lo * step + (j - pad) * c_n;
        d[1] = 2 * (lo - ox0 + odd_start);
        d[2] = 2 * ((hi - ox0) & ~1);
        d[3] = lo >= hi ? -1 : odd_start | (((hi - ox0) & 1) << 1);
    }
}

/* One tap's products over a block row (see bwd_w_block_taps for d) added into its four channels' sums pg[0..3]. */
MT_INLINE void bwd_w_tap(const int8_t *px, const int32_t *ep, const int32_t *d, int32_t step, int32_t zz,
                         int32_t zw, int32_t *pg)
{
    const int32_t *pq = ep + d[1], *end = ep + d[2];
    int32_t a0 = pg[0], a1 = pg[1], a2 = pg[2], a3 = pg[3];
    px += d[0];
    if (d[3] & 1) { /* odd start: its partner before it is z_x */
        bwd_w_pair(zw, mt_read_s8x4(px), pq - 4, zz, &a0, &a1, &a2, &a3);
        px += step;
    }
    if (pq < end) {
        px = bwd_w_pairs(px, pq, end, step, zz, &a0, &a1, &a2, &a3);
        pq = end;
    }
    if (d[3] & 2) { /* odd end: its partner after it is z_x */
        bwd_w_pair(mt_read_s8x4(px), zw, pq, zz, &a0, &a1, &a2, &a3);
    }
    pg[0] = a0;
    pg[1] = a1;
    pg[2] = a2;
    pg[3] = a3;
}

/* Every tap column of one tap row over one block row (xrow: the input row at channel c0; d to
 * d_end: the tap descriptors), into the sums pg; a function of its own so that its loop keeps
 * its pointers in registers. */
static MT_NOINLINE void bwd_w_row(const int8_t *xrow, const int32_t *ep, const int32_t *d, const int32_t *d_end,
                                  int32_t step, int32_t zz, int32_t zw, int32_t *pg)
{
    for (; d < d_end; d += 4, pg += 4) {
        if (d[3] >= 0) {
            bwd_w_tap(xrow, ep, d, step, zz, zw, pg);
        }
    }
}

/* The channel quads [c0, c0 + 4) of one depthwise layer, c0 + 4 <= C (see the file comment);
 * tap_lo, tap_hi: the tap column ranges. */
static MT_NOINLINE void bwd_w_quads(const mt_conv_params *p,
                                    const mt_dims *in_d,
                                    const int8_t *input,
                                    const mt_dims *out_d,
                                    const int8_t *e,
                                    const mt_dims *f_d,
                                    int32_t *grad,
                                    int32_t *grad_bias,
                                    const int32_t *tap_lo,
                                    const int32_t *tap_hi)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c, x_row = w * c_n;
    const int32_t kh = f_d->h, kw = f_d->w, kk = kh * kw;
    const int32_t ho = out_d->h, wo = out_d->w, sh = p->stride_h;
    const int32_t zx = p->input_zero_point;
    const int32_t zz = (int32_t)(((uint32_t)(-zx) & 0xFFFFu) | ((uint32_t)(-zx) << 16));
    const int32_t zw = (int32_t)(((uint32_t)zx & 0xFFu) * 0x01010101u); /* four inputs at z_x: x - z_x = 0 */
    const int32_t step = p->stride_w * c_n; /* input bytes from a position to the next */
    /* the taps some position reaches inside the image: only their sums are cleared and added */
    const int32_t i_lo = p->pad_top - (ho - 1) * sh > 0 ? p->pad_top - (ho - 1) * sh : 0;
    const int32_t i_hi = h + p->pad_top < kh ? h + p->pad_top : kh;
    const int32_t j_lo = p->pad_left - (wo - 1) * p->stride_w > 0 ? p->pad_left - (wo - 1) * p->stride_w : 0;
    const int32_t j_hi = w + p->pad_left < kw ? w + p->pad_left : kw;
    int32_t ep[4 * MT_BWW_PAIRS];
    int32_t d[4 * MT_BWW_KW];
    int32_t gt[4 * MT_BWW_KK]; /* gt[4 t + c]: the sums of tap t, channel c0 + c, added into grad at the end */
    int32_t ox0, c0;
    for (ox0 = 0; ox0 < wo; ox0 += 2 * MT_BWW_PAIRS) {
        const int32_t ox1 = ox0 + 2 * MT_BWW_PAIRS < wo ? ox0 + 2 * MT_BWW_PAIRS : wo;
        bwd_w_block_taps(ox0, ox1, kw, step, p->pad_left, c_n, tap_lo, tap_hi, d);
        for (c0 = 0; c0 + 4 <= c_n; c0 += 4) {
            int32_t b0 = 0, b1 = 0, b2 = 0, b3 = 0;
            int32_t n, oy, i, j;
            for (i = i_lo; i < i_hi; ++i) {
                for (j = j_lo; j < j_hi; ++j) {
                    int32_t *pg = gt + 4 * (i * kw + j);
                    pg[0] = pg[1] = pg[2] = pg[3] = 0;
                }
            }
            for (n = 0; n < in_d->n; ++n) {
                for (oy = 0; oy < ho; ++oy) {
                    const int8_t *erow = e + ((n * ho + oy) * wo + ox0) * c_n + c0;
                    int32_t q;
                    /* the block's errors as position pairs (ox0 + 2q, ox0 + 2q + 1), an odd last one with a
                     * zero partner, and the bias sums */
                    for (q = 0; 2 * q < ox1 - ox0; ++q) {
                        const int8_t *pe = erow + 2 * q * c_n;
                        bwd_w_error_pair(mt_read_s8x4(pe), 2 * q + 1 < ox1 - ox0 ? mt_read_s8x4(pe + c_n) : 0,
                                         ep + 4 * q);
                        b0 = bwd_w_add_halves(ep[4 * q], b0);
                        b1 = bwd_w_add_halves(ep[4 * q + 1], b1);
                        b2 = bwd_w_add_halves(ep[4 * q + 2], b2);
                        b3 = bwd_w_add_halves(ep[4 * q + 3], b3);
                    }
                    for (i = 0; i < kh; ++i) {
                        const int32_t iy = oy * sh - p->pad_top + i;
                        if (iy >= 0 && iy < h) { /* padding rows: real 0 */
                            bwd_w_row(input + (n * h + iy) * x_row + c0, ep, d, d + 4 * kw, step, zz, zw,
                                      gt + 4 * i * kw);
                        }
                    }
                }
            }
            for (i = i_lo; i < i_hi; ++i) {
                for (j = j_lo; j < j_hi; ++j) {
                    const int32_t *pg = gt + 4 * (i * kw + j);
                    int32_t *g = grad + c0 * kk + i * kw + j;
                    g[0] += pg[0];
                    g[kk] += pg[1];
                    g[2 * kk] += pg[2];
                    g[3 * kk] += pg[3];
                }
            }
            grad_bias[c0] += b0;
            grad_bias[c0 + 1] += b1;
            grad_bias[c0 + 2] += b2;
            grad_bias[c0 + 3] += b3;
        }
    }
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
        output_dims->c == input_dims->c && params->stride_h >= 1 && params->stride_w >= 1 &&
        filter_dims->w <= MT_BWW_KW && filter_dims->h * filter_dims->w <= MT_BWW_KK) {
        int32_t c, tap_lo[MT_BWW_KW], tap_hi[MT_BWW_KW];
        bwd_w_tap_columns(params, input_dims->w, output_dims->w, filter_dims->w, tap_lo, tap_hi);
        bwd_w_quads(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias, tap_lo, tap_hi);
        for (c = input_dims->c & ~3; c < input_dims->c; ++c) {
            bwd_w_single(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias, c);
        }
        return MT_OK;
    }
#endif /* MT_DSP */
    return mt_grouped_conv2d_bwd_w_s8_s8_ref(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias);
}
