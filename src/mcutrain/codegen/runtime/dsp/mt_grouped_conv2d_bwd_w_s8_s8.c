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
 * Maps of at most MT_BWP_PAIRS output position pairs (up to 4x4 outputs) take the plane body
 * below (bwp_quads) instead, whose per-tap cost is one LDR and one SMLAD per position pair.
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

/*
 * Small maps (at most MT_BWP_PAIRS position pairs: up to 4x4 outputs) have too few positions per
 * tap for the pair loop above to pay its per-tap cost, so they take a plane body instead. Per
 * channel quad and sample the four channels' inputs are widened once into zero-padded int16
 * planes of x - z_x (at stride 2 each row holds its even columns, then its odd ones), so that a
 * tap reads each position pair (x[p], x[p + 1]) of a channel with one LDR, padding included (its
 * zeros add nothing: no odd ends and no per-tap ranges); each channel's errors become its position
 * pairs (e[ox], e[ox + 1]) (an odd last one with a zero partner), which stay in registers while
 * the channel's taps run, one SMLAD per pair straight into g.
 */
#define MT_BWP_COLS 16  /* int16 columns of a plane row (stride 2: 8 even, then 8 odd) */
#define MT_BWP_ROWS 10  /* plane rows: (ho - 1) * stride + kh <= 10 */
#define MT_BWP_PAIRS 8  /* the most position pairs: 4 output rows of 2 */
#define MT_BWP_WIDEN 40 /* the most input pairs widened: rows * cols <= 80 inputs */
#define MT_BWP_PLANE (MT_BWP_ROWS * MT_BWP_COLS)

/* The int16 offset of padded column x in a plane row at stride s (1 or 2). */
MT_INLINE int32_t bwp_col(int32_t x, int32_t s)
{
    return s == 1 ? x : (x & 1) * (MT_BWP_COLS / 2) + (x >> 1);
}

/* Whether the plane body takes the layer: equal strides of 1 or 2, more than one output position
 * (one output leaves the planes' set-up nothing to share: the quad loop is about twice as fast on
 * MCUNet-5FPS's 1x1 maps at 32x32, 9.7 -> 4.0 instructions/MAC at 5x5), at most MT_BWP_PAIRS position
 * pairs, and every padded input a tap reads inside the planes. */
static int bwp_fits(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *out_d, const mt_dims *f_d)
{
    const int32_t s = p->stride_h, nq = (out_d->w + 1) / 2;
    return s == p->stride_w && s <= 2 && out_d->h * out_d->w > 1 && out_d->h * nq <= MT_BWP_PAIRS &&
           p->pad_top >= 0 && p->pad_left >= 0 &&
           (out_d->h - 1) * s + f_d->h <= MT_BWP_ROWS && s * (2 * nq - 1) + f_d->w <= MT_BWP_COLS &&
           in_d->h * in_d->w <= 2 * MT_BWP_WIDEN;
}

/* The widening of a layer's inputs into the planes, listed once per layer: per entry the byte
 * offset of an input from the sample's first input of the quad and the int16 offset of its column
 * in channel c0's plane; pairs are inputs s apart in one row (neighbours in a plane row). */
typedef struct {
    int32_t n_pairs, n_singles;
    int32_t pairs[MT_BWP_WIDEN][2];
    int32_t singles[2 * MT_BWP_ROWS][2];
} bwp_widening;

/* The inputs of each plane row a tap reads (rows, of cols inputs), at stride 2 each column parity
 * r in turn, as pairs and a last single (see bwp_widening); bwp_fits bounds their count. */
static void bwp_list_widening(const mt_conv_params *p, int32_t h, int32_t w, int32_t c_n, int32_t rows, int32_t cols,
                              bwp_widening *wl)
{
    const int32_t s = p->stride_w;
    int32_t iy, ix, r;
    wl->n_pairs = wl->n_singles = 0;
    for (iy = 0; iy < h && iy + p->pad_top < rows; ++iy) {
        for (r = 0; r < s; ++r) {
            for (ix = r; ix < cols; ix += 2 * s) {
                int32_t *d = ix + s < cols ? wl->pairs[wl->n_pairs++] : wl->singles[wl->n_singles++];
                d[0] = (iy * w + ix) * c_n;
                d[1] = (iy + p->pad_top) * MT_BWP_COLS + bwp_col(ix + p->pad_left, s);
            }
        }
    }
}

/* One sample's inputs of channels [c0, c0 + 4) (xb: its first input at c0) into the planes pl
 * (channel c0 + c at pl + c * MT_BWP_PLANE), centred by zz (-z_x in both halves): per pair of
 * inputs s apart (sc bytes), per channel one int16 pair word (PKH, SXTAB16) stored with one STR. */
static void bwp_widen(const int8_t *xb, const bwp_widening *wl, int32_t sc, int32_t zz, int16_t *pl)
{
    const int32_t(*d)[2] = wl->pairs, (*end)[2] = wl->pairs + wl->n_pairs;
    int32_t k;
    for (; d < end; ++d) {
        const int8_t *px = xb + (*d)[0];
        int16_t *pd = pl + (*d)[1];
        const int32_t va = mt_read_s8x4(px), vb = mt_read_s8x4(px + sc);
        const int32_t lo = mt_pkhbt(va, vb), hi = mt_pkhtb(va, vb);
        mt_write_s16x2(pd, mt_sxtab16(zz, lo));
        mt_write_s16x2(pd + MT_BWP_PLANE, mt_sxtab16_ror8(zz, lo));
        mt_write_s16x2(pd + 2 * MT_BWP_PLANE, mt_sxtab16(zz, hi));
        mt_write_s16x2(pd + 3 * MT_BWP_PLANE, mt_sxtab16_ror8(zz, hi));
    }
    for (k = 0; k < wl->n_singles; ++k) {
        const int32_t v = mt_read_s8x4(xb + wl->singles[k][0]);
        const int32_t lo = mt_sxtab16(zz, v), hi = mt_sxtab16_ror8(zz, v);
        int16_t *pd = pl + wl->singles[k][1];
        pd[0] = (int16_t)lo;
        pd[MT_BWP_PLANE] = (int16_t)hi;
        pd[2 * MT_BWP_PLANE] = (int16_t)(lo >> 16);
        pd[3 * MT_BWP_PLANE] = (int16_t)(hi >> 16);
    }
}

/* One sample's errors of channels [c0, c0 + 4) (eb: its first at c0) as position pairs,
 * ep[c * MT_BWP_PAIRS + n] for pair n = oy * nq + q of channel c0 + c, and their bias sums into b.
 * With an even wo the caller passes the map as one row (no pair crosses a row). */
static void bwp_errors(const int8_t *eb, int32_t ho, int32_t wo, int32_t c_n, int32_t *ep, int32_t *b)
{
    int32_t b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
    int32_t oy, ox;
    for (oy = 0; oy < ho; ++oy) {
        const int8_t *pe = eb + oy * wo * c_n;
        for (ox = 0; ox < wo; ox += 2, pe += 2 * c_n, ++ep) {
            int32_t pq[4];
            bwd_w_error_pair(mt_read_s8x4(pe), ox + 1 < wo ? mt_read_s8x4(pe + c_n) : 0, pq);
            ep[0] = pq[0];
            ep[MT_BWP_PAIRS] = pq[1];
            ep[2 * MT_BWP_PAIRS] = pq[2];
            ep[3 * MT_BWP_PAIRS] = pq[3];
            b0 = bwd_w_add_halves(pq[0], b0);
            b1 = bwd_w_add_halves(pq[1], b1);
            b2 = bwd_w_add_halves(pq[2], b2);
            b3 = bwd_w_add_halves(pq[3], b3);
        }
    }
    b[0] = b0;
    b[1] = b1;
    b[2] = b2;
    b[3] = b3;
}

/* The taps of rows [i_lo, i_hi) of one channel (pl: its plane, ec: its np error pairs, nq to an
 * output row): g[i * kw + j] += the products of every position pair. */
static void bwp_taps(const int16_t *pl, const int32_t *ec, int32_t np, int32_t nq, int32_t s, int32_t kw,
                     int32_t i_lo, int32_t i_hi, int32_t *g)
{
    int32_t i, j, n;
    for (i = i_lo; i < i_hi; ++i) {
        for (j = 0; j < kw; ++j) {
            const int16_t *pt = pl + i * MT_BWP_COLS + bwp_col(j, s);
            int32_t acc = g[i * kw + j];
            for (n = 0; n < np; ++n) {
                acc = mt_smlad(mt_read_s16x2(pt + (n / nq) * s * MT_BWP_COLS + 2 * (n % nq)), ec[n], acc);
            }
            g[i * kw + j] = acc;
        }
    }
}

#if defined(MT_DSP_NATIVE)
/*
 * The native tap rows of the common small maps (square kernels of 3, 5 and 7): every tap of a
 * kernel row unrolled (assembler .rept, bwp_j the tap column, bwp_col its first pair's byte
 * offset in the plane row), the pairs' offsets immediates, so a tap is one LDR and one SMLAD per
 * position pair between the load and the store of its g element, and a kernel row adds four.
 * 4x4 outputs (8 pairs): one channel a call, its pairs in 8 registers. 2x2 outputs (2 pairs):
 * the quad's four channels in one call (their planes MT_BWP_PLANE apart, their g elements kk apart).
 */
typedef void (*bwp_rows_fn)(const int16_t *p, const int32_t *ec, int32_t *g, const int32_t *g_end);

#define BWP_COL1 "(2 * bwp_j)"
#define BWP_COL2 "((bwp_j & 1) * 16 + (bwp_j >> 1) * 2)"
#define BWP_STR1(X) #X
#define BWP_STR(X) BWP_STR1(X) /* X expanded, as a string */
#define BWP_MAC(OFF, E) "ldr %[x], [%[p], #bwp_col + " OFF "]\n\tsmlad %[s], %[x], %[" E "], %[s]\n\t"
#define BWP_TAP(G, MACS) "ldr %[s], [%[g], #" G "]\n\t" MACS "str %[s], [%[g], #" G "]\n\t"
#define BWP_ROWS_ASM(KW, S, COL, TAP)                                                                      \
    ".set bwp_rs, " #S " * 32\n\t"                                                                          \
    ".set bwp_kk4, 4 * " #KW " * " #KW "\n\t"                                                               \
    "1:\n\t"                                                                                                \
    ".set bwp_j, 0\n\t"                                                                                     \
    ".rept " #KW "\n\t"                                                                                     \
    ".set bwp_col, " COL "\n\t" TAP ".set bwp_j, bwp_j + 1\n\t"                                             \
    ".endr\n\t"                                                                                             \
    "add %[p], %[p], #32\n\t"                                                                               \
    "add %[g], %[g], #4 * " #KW "\n\t"                                                                      \
    "cmp %[g], %[ge]\n\t"                                                                                   \
    "bne 1b"
#define BWP_OPERANDS                                                                                        \
    : [p] "+r"(p), [g] "+r"(g), [s] "=&r"(s), [x] "=&r"(x)                                                 \
    : [e0] "r"(e0), [e1] "r"(e1), [e2] "r"(e2), [e3] "r"(e3), [e4] "r"(e4), [e5] "r"(e5), [e6] "r"(e6),     \
      [e7] "r"(e7), [ge] "r"(g_end)                                                                          \
    : "cc", "memory"
/* one channel, 4 output rows of 2 pairs: pair n = 2 oy + q at oy * bwp_rs + 4 q */
#define BWP_TAP8                                                                                            \
    BWP_TAP("4 * bwp_j", BWP_MAC("0", "e0") BWP_MAC("4", "e1") BWP_MAC("bwp_rs", "e2")                      \
                             BWP_MAC("bwp_rs + 4", "e3") BWP_MAC("2 * bwp_rs", "e4")                        \
                             BWP_MAC("2 * bwp_rs + 4", "e5") BWP_MAC("3 * bwp_rs", "e6")                    \
                             BWP_MAC("3 * bwp_rs + 4", "e7"))
/* four channels, 2 output rows of 1 pair: channel c's pairs e(2c), e(2c + 1) */
#define BWP_TAP2(C, EA, EB)                                                                                 \
    BWP_TAP(C " * bwp_kk4 + 4 * bwp_j", BWP_MAC(C " * 2 * " BWP_STR(MT_BWP_PLANE), EA)                       \
                                            BWP_MAC(C " * 2 * " BWP_STR(MT_BWP_PLANE) " + bwp_rs", EB))
#define BWP_QUAD2 BWP_TAP2("0", "e0", "e1") BWP_TAP2("1", "e2", "e3") BWP_TAP2("2", "e4", "e5") BWP_TAP2("3", "e6", "e7")
/* E: the stride of the error pairs' groups of two in ec (one channel: 2; the quad: MT_BWP_PAIRS) */
#define BWP_ROWS(NAME, KW, S, COL, TAP, E)                                                                 \
    static void NAME(const int16_t *p, const int32_t *ec, int32_t *g, const int32_t *g_end)                \
    {                                                                                                       \
        const int32_t e0 = ec[0], e1 = ec[1], e2 = ec[E], e3 = ec[E + 1], e4 = ec[2 * E],                  \
                      e5 = ec[2 * E + 1], e6 = ec[3 * E], e7 = ec[3 * E + 1];                              \
        int32_t s, x;                                                                                       \
        __asm__ volatile(BWP_ROWS_ASM(KW, S, COL, TAP) BWP_OPERANDS);                                       \
    }

BWP_ROWS(bwp_rows8_k3s1, 3, 1, BWP_COL1, BWP_TAP8, 2)
BWP_ROWS(bwp_rows8_k5s1, 5, 1, BWP_COL1, BWP_TAP8, 2)
BWP_ROWS(bwp_rows8_k7s1, 7, 1, BWP_COL1, BWP_TAP8, 2)
BWP_ROWS(bwp_rows8_k3s2, 3, 2, BWP_COL2, BWP_TAP8, 2)
BWP_ROWS(bwp_quad2_k3s1, 3, 1, BWP_COL1, BWP_QUAD2, MT_BWP_PAIRS)
BWP_ROWS(bwp_quad2_k5s1, 5, 1, BWP_COL1, BWP_QUAD2, MT_BWP_PAIRS)
BWP_ROWS(bwp_quad2_k7s1, 7, 1, BWP_COL1, BWP_QUAD2, MT_BWP_PAIRS)
BWP_ROWS(bwp_quad2_k3s2, 3, 2, BWP_COL2, BWP_QUAD2, MT_BWP_PAIRS)
BWP_ROWS(bwp_quad2_k5s2, 5, 2, BWP_COL2, BWP_QUAD2, MT_BWP_PAIRS)
BWP_ROWS(bwp_quad2_k7s2, 7, 2, BWP_COL2, BWP_QUAD2, MT_BWP_PAIRS)

/* The native tap rows for ho output rows of nq pairs and a square kernel of kw at stride s, 0:
 * none (bwp_taps); *quad: whether one call takes the quad's four channels. (4 output rows at stride
 * 2 need more than MT_BWP_ROWS plane rows past a 3x3 kernel.) */
static bwp_rows_fn bwp_native(int32_t ho, int32_t nq, int32_t kh, int32_t kw, int32_t s, int *quad)
{
    static const bwp_rows_fn rows8[2][3] = {{bwp_rows8_k3s1, bwp_rows8_k5s1, bwp_rows8_k7s1},
                                            {bwp_rows8_k3s2, 0, 0}};
    static const bwp_rows_fn quad2[2][3] = {{bwp_quad2_k3s1, bwp_quad2_k5s1, bwp_quad2_k7s1},
                                            {bwp_quad2_k3s2, bwp_quad2_k5s2, bwp_quad2_k7s2}};
    *quad = ho == 2;
    if (kh != kw || (kw != 3 && kw != 5 && kw != 7) || !((ho == 4 && nq == 2) || (ho == 2 && nq == 1))) {
        return 0;
    }
    return (ho == 4 ? rows8 : quad2)[s - 1][(kw - 3) / 2];
}
#endif /* MT_DSP_NATIVE */

/* The taps of one sample's channel quad [c0, c0 + 4) from its planes pl and error pairs ep into
 * grad (g0: channel c0's kk elements). */
MT_INLINE void bwp_quad_taps(const int16_t *pl, const int32_t *ep, int32_t np, int32_t nq, int32_t s, int32_t kw,
                             int32_t kk, int32_t i_lo, int32_t i_hi, int32_t *g0)
{
    int32_t k;
    for (k = 0; k < 4; ++k) {
        bwp_taps(pl + k * MT_BWP_PLANE, ep + k * MT_BWP_PAIRS, np, nq, s, kw, i_lo, i_hi, g0 + k * kk);
    }
}

/* Every channel quad of a layer bwp_fits takes (see above); the channels past the last quad are the caller's. */
static MT_NOINLINE void bwp_quads(const mt_conv_params *p,
                                  const mt_dims *in_d,
                                  const int8_t *input,
                                  const mt_dims *out_d,
                                  const int8_t *e,
                                  const mt_dims *f_d,
                                  int32_t *grad,
                                  int32_t *grad_bias)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c, kh = f_d->h, kw = f_d->w, kk = kh * kw;
    const int32_t ho = out_d->h, wo = out_d->w, s = p->stride_h, nq = (wo + 1) / 2, np = ho * nq;
    const int32_t zx = p->input_zero_point;
    const int32_t zz = (int32_t)(((uint32_t)(-zx) & 0xFFFFu) | ((uint32_t)(-zx) << 16));
    /* the tap rows some output row reaches inside the image */
    const int32_t i_lo = p->pad_top - (ho - 1) * s > 0 ? p->pad_top - (ho - 1) * s : 0;
    const int32_t i_hi = h + p->pad_top < kh ? h + p->pad_top : kh;
    /* errors as one row when no pair crosses a row */
    const int32_t e_rows = wo & 1 ? ho : 1, e_cols = wo & 1 ? wo : ho * wo;
#if defined(MT_DSP_NATIVE)
    int quad;
    const bwp_rows_fn rows_fn = bwp_native(ho, nq, kh, kw, s, &quad);
#endif
    int16_t pl[4 * MT_BWP_PLANE]; /* zero padding, written once; each quad rewrites the inputs */
    int32_t ep[4 * MT_BWP_PAIRS];
    bwp_widening wl;
    int32_t c0, n, k;
    if (i_lo >= i_hi) {
        return;
    }
    bwp_list_widening(p, h, w, c_n, (ho - 1) * s + kh, w < MT_BWP_COLS - p->pad_left ? w : MT_BWP_COLS - p->pad_left,
                      &wl);
    memset(pl, 0, sizeof pl);
    for (c0 = 0; c0 + 4 <= c_n; c0 += 4) {
        int32_t b[4] = {0, 0, 0, 0};
        int32_t *g0 = grad + c0 * kk;
        for (n = 0; n < in_d->n; ++n) {
            bwp_widen(input + n * h * w * c_n + c0, &wl, s * c_n, zz, pl);
            bwp_errors(e + n * ho * wo * c_n + c0, e_rows, e_cols, c_n, ep, b);
#if defined(MT_DSP_NATIVE)
            if (rows_fn && quad) {
                rows_fn(pl + i_lo * MT_BWP_COLS, ep, g0 + i_lo * kw, g0 + i_hi * kw);
                continue;
            }
            if (rows_fn) {
                for (k = 0; k < 4; ++k) {
                    int32_t *g = g0 + k * kk;
                    rows_fn(pl + k * MT_BWP_PLANE + i_lo * MT_BWP_COLS, ep + k * MT_BWP_PAIRS, g + i_lo * kw,
                            g + i_hi * kw);
                }
                continue;
            }
#endif
            bwp_quad_taps(pl, ep, np, nq, s, kw, kk, i_lo, i_hi, g0);
        }
        for (k = 0; k < 4; ++k) {
            grad_bias[c0 + k] += b[k];
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
        if (bwp_fits(params, input_dims, output_dims, filter_dims)) {
            bwp_quads(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias);
        } else {
            bwd_w_tap_columns(params, input_dims->w, output_dims->w, filter_dims->w, tap_lo, tap_hi);
            bwd_w_quads(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias, tap_lo, tap_hi);
        }
        for (c = input_dims->c & ~3; c < input_dims->c; ++c) {
            bwd_w_single(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias, c);
        }
        return MT_OK;
    }
#endif /* MT_DSP */
    return mt_grouped_conv2d_bwd_w_s8_s8_ref(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias);
}
