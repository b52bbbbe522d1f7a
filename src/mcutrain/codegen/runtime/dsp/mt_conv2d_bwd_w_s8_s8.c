/*
 * Conv weight and bias gradients from the kept int8 input and int8 errors, accumulated in int32
 * (Python twin: fqt_kernels.conv2d_bwd_w_acc and bias_grad_acc in mode "int"; exact in any order).
 * DSP twin of train/fqt/mt_conv2d_bwd_w_s8_s8.c, bit-exact with it (the reference loop, in
 * mt_conv2d_bwd_w_s8_s8_ref.h, on a core without DSP). One input channel and a 3x3 kernel keep
 * the nine sums in registers (mt_conv_c1.h); else the reduction over output positions runs in
 * pairs. Per block of eight positions, the errors of each output channel become four words
 * (e[p], e[p + 1]) and a chunk of the positions' im2col (x - z_x, padding 0) becomes, per k, four
 * words (x[p, k], x[p + 1, k]) on the stack; then each gradient g[o, k] is loaded once, takes four
 * SMLAD (eight MACs) and is stored: 8 instructions per 8 MACs in the loop. Output channels whose
 * eight errors are all 0 are skipped (exact).
 * mt_conv2d_bwd_w_s8_s8_keep (partial updates) zeroes the kept rows, then runs the same loops over
 * the kept filters only (keep[t] for t, the errors in the full layout); the pruned rows (zero errors)
 * are not touched, which the masked update never reads.
 * NOTE: |g| <= 127 * 255 * positions * samples < 2^31 for fewer than 66 000 position-samples; the
 * bound holds for partial sums in any order, so the DSP order gives the same sums.
 */
#include "mt_arch.h"
#include "mt_conv2d_bwd_w_s8_s8_ref.h"
#include "mt_conv_c1.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"

#if MT_DSP
#define MT_BWD_W_KC 64 /* k values per im2col chunk: 64 x 4 words = 1 KB of stack */
#define MT_BWD_W_OC 32 /* output channels per error block: 32 x 4 words = 512 B of stack */

/* (a.hi, b.hi) as one word (PKHTB with ASR #16). */
MT_INLINE int32_t pk_hi(int32_t a, int32_t b)
{
#if defined(MT_DSP_NATIVE)
    int32_t r;
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(b), "r"(a));
    return r;
#else  /* !defined(MT_DSP_NATIVE) */
    return mt_pack16(mt_hi16(a), mt_hi16(b));
#endif /* MT_DSP_NATIVE */
}

/*
 * g[k] += xb[4k .. 4k + 3] . (e0, e1, e2, e3) for k < n (pairs of positions in each word): per k one
 * LDM of the four pair words, LDR, four SMLAD, STR.
 */
MT_INLINE void grad_row(const int32_t *xb, int32_t n, int32_t e0, int32_t e1, int32_t e2, int32_t e3, int32_t *g)
{
#if defined(MT_DSP_NATIVE)
    int32_t n2 = n >> 1, v;
    if (n2 > 0) {
        __asm__ volatile("1:\n\t"
                         "ldmia %[x]!, {r8, r9, r10, r11}\n\t"
                         "ldr   %[v], [%[g]]\n\t"
                         "smlad %[v], r8, %[e0], %[v]\n\t"
                         "smlad %[v], r9, %[e1], %[v]\n\t"
                         "smlad %[v], r10, %[e2], %[v]\n\t"
                         "smlad %[v], r11, %[e3], %[v]\n\t"
                         "str   %[v], [%[g]], #4\n\t"
                         "ldmia %[x]!, {r8, r9, r10, r11}\n\t"
                         "ldr   %[v], [%[g]]\n\t"
                         "smlad %[v], r8, %[e0], %[v]\n\t"
                         "smlad %[v], r9, %[e1], %[v]\n\t"
                         "smlad %[v], r10, %[e2], %[v]\n\t"
                         "smlad %[v], r11, %[e3], %[v]\n\t"
                         "str   %[v], [%[g]], #4\n\t"
                         "subs  %[n], %[n], #1\n\t"
                         "bne   1b"
                         : [x] "+r"(xb), [g] "+r"(g), [n] "+r"(n2), [v] "=&r"(v)
                         : [e0] "r"(e0), [e1] "r"(e1), [e2] "r"(e2), [e3] "r"(e3)
                         : "r8", "r9", "r10", "r11", "cc", "memory");
    }
    if (n & 1) {
        *g = mt_smlad(xb[3], e3, mt_smlad(xb[2], e2, mt_smlad(xb[1], e1, mt_smlad(xb[0], e0, *g))));
    }
#else  /* !defined(MT_DSP_NATIVE) */
    int32_t k;
    for (k = 0; k < n; ++k) {
        g[k] = mt_smlad(xb[4 * k + 3], e3,
                        mt_smlad(xb[4 * k + 2], e2, mt_smlad(xb[4 * k + 1], e1, mt_smlad(xb[4 * k], e0, g[k]))));
    }
#endif /* MT_DSP_NATIVE */
}

/*
 * grad_row for a channel whose block has one or two nonzero pair words (after the max-pool routing
 * and the ReLU mask three pair words in four are zero): g[k] += xa[4k] . ea (+ xb[4k] . eb), two k per
 * pass with LDRD/STRD of the gradients: 4 (one pair) or 6 (two pairs) instructions per k against 8.
 */
MT_INLINE void grad_row1(const int32_t *xa, int32_t n, int32_t ea, int32_t *g)
{
#if defined(MT_DSP_NATIVE)
    int32_t n2 = n >> 1, v0, v1, x0, x1;
    if (n2 > 0) {
        __asm__ volatile("1:\n\t"
                         "ldr   %[x0], [%[xa]], #16\n\t"
                         "ldr   %[x1], [%[xa]], #16\n\t"
                         "ldrd  %[v0], %[v1], [%[g]]\n\t"
                         "smlad %[v0], %[x0], %[ea], %[v0]\n\t"
                         "smlad %[v1], %[x1], %[ea], %[v1]\n\t"
                         "strd  %[v0], %[v1], [%[g]], #8\n\t"
                         "subs  %[n], %[n], #1\n\t"
                         "bne   1b"
                         : [xa] "+r"(xa), [g] "+r"(g), [n] "+r"(n2), [v0] "=&r"(v0), [v1] "=&r"(v1), [x0] "=&r"(x0),
                           [x1] "=&r"(x1)
                         : [ea] "r"(ea)
                         : "cc", "memory");
    }
    if (n & 1) {
        *g = mt_smlad(xa[0], ea, *g);
    }
#else  /* !defined(MT_DSP_NATIVE) */
    int32_t k;
    for (k = 0; k < n; ++k) {
        g[k] = mt_smlad(xa[4 * k], ea, g[k]);
    }
#endif /* MT_DSP_NATIVE */
}

MT_INLINE void grad_row2(const int32_t *xa, const int32_t *xb, int32_t n, int32_t ea, int32_t eb, int32_t *g)
{
#if defined(MT_DSP_NATIVE)
    int32_t n2 = n >> 1, v0, v1, x0, x1;
    if (n2 > 0) {
        __asm__ volatile("1:\n\t"
                         "ldrd  %[v0], %[v1], [%[g]]\n\t"
                         "ldr   %[x0], [%[xa]], #16\n\t"
                         "ldr   %[x1], [%[xb]], #16\n\t"
                         "smlad %[v0], %[x0], %[ea], %[v0]\n\t"
                         "smlad %[v0], %[x1], %[eb], %[v0]\n\t"
                         "ldr   %[x0], [%[xa]], #16\n\t"
                         "ldr   %[x1], [%[xb]], #16\n\t"
                         "smlad %[v1], %[x0], %[ea], %[v1]\n\t"
                         "smlad %[v1], %[x1], %[eb], %[v1]\n\t"
                         "strd  %[v0], %[v1], [%[g]], #8\n\t"
                         "subs  %[n], %[n], #1\n\t"
                         "bne   1b"
                         : [xa] "+r"(xa), [xb] "+r"(xb), [g] "+r"(g), [n] "+r"(n2), [v0] "=&r"(v0), [v1] "=&r"(v1),
                           [x0] "=&r"(x0), [x1] "=&r"(x1)
                         : [ea] "r"(ea), [eb] "r"(eb)
                         : "cc", "memory");
    }
    if (n & 1) {
        *g = mt_smlad(xb[0], eb, mt_smlad(xa[0], ea, *g));
    }
#else  /* !defined(MT_DSP_NATIVE) */
    int32_t k;
    for (k = 0; k < n; ++k) {
        g[k] = mt_smlad(xb[4 * k], eb, mt_smlad(xa[4 * k], ea, g[k]));
    }
#endif /* MT_DSP_NATIVE */
}

/*
 * Pair words of channels [c_lo, c_lo + cn) of tap (i, j) for the eight positions (iy0, ix0: window
 * origins; valid[q] = 0 past the block): xb[(c - c_lo) * 4 + q / 2] = (x[2q'] - z_x, x[2q' + 1] - z_x).
 */
MT_INLINE void fill_tap(const int8_t *input, int32_t h, int32_t w, int32_t c_n, int32_t zx, const int32_t *bq,
                        const int32_t *iy0, const int32_t *ix0, int32_t np, int32_t i, int32_t j, int32_t c_lo,
                        int32_t cn, int32_t *xb)
{
    const int32_t nz = (int32_t)(((uint32_t)(-zx) & 0xFFFFu) * 0x10001u);
    const int32_t zx4 = (int32_t)(((uint32_t)zx & 0xFFu) * 0x01010101u);
    int32_t q, c;
    for (q = 0; q < 4; ++q) {
        const int8_t *src[2];
        int32_t s;
        for (s = 0; s < 2; ++s) {
            const int32_t p = 2 * q + s, iy = iy0[p] + i, ix = ix0[p] + j;
            src[s] = p < np && iy >= 0 && iy < h && ix >= 0 && ix < w ? input + ((bq[p] * h + iy) * w + ix) * c_n + c_lo
                                                                      : NULL;
        }
        c = 0;
        if ((c_n & 3) == 0) { /* four channels per pair of loads: x - z_x in pairs by PKH and SXTAB16 */
            for (; c + 4 <= cn; c += 4) {
                const int32_t va = src[0] ? mt_read_s8x4(src[0] + c) : zx4;
                const int32_t vb = src[1] ? mt_read_s8x4(src[1] + c) : zx4;
                const int32_t lo = mt_pkhbt(va, vb), hi = pk_hi(va, vb);
                xb[(c + 0) * 4 + q] = mt_sxtab16(nz, lo);
                xb[(c + 1) * 4 + q] = mt_sxtab16_ror8(nz, lo);
                xb[(c + 2) * 4 + q] = mt_sxtab16(nz, hi);
                xb[(c + 3) * 4 + q] = mt_sxtab16_ror8(nz, hi);
            }
        }
        for (; c < cn; ++c) {
            const int32_t a = src[0] ? src[0][c] - zx : 0, b = src[1] ? src[1][c] - zx : 0;
            xb[c * 4 + q] = (int32_t)(((uint32_t)a & 0xFFFFu) | ((uint32_t)b << 16));
        }
    }
}

/* The DSP loop over the filters keep[0..n) (keep NULL: 0..n), errors e[position, O]. */
MT_INLINE void bwd_w_dsp(const mt_conv_params *params,
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
    /* a chunk is whole taps when a tap's channels fit, else a run of one tap's channels */
    const int32_t taps_per = c_n <= MT_BWD_W_KC ? MT_BWD_W_KC / c_n : 1;
    const int32_t c_step = c_n <= MT_BWD_W_KC ? c_n : MT_BWD_W_KC;
    int32_t xb[MT_BWD_W_KC * 4];
    int32_t eb[MT_BWD_W_OC * 4];
    uint8_t nzq[MT_BWD_W_OC];
    int32_t p0;
    for (p0 = 0; p0 < npos; p0 += 8) {
        const int32_t np = npos - p0 < 8 ? npos - p0 : 8;
        int32_t bq[8], iy0[8], ix0[8];
        int32_t q, oc0;
        for (q = 0; q < 8; ++q) {
            const int32_t p = p0 + q < npos ? p0 + q : p0;
            bq[q] = p / (ho * wo);
            iy0[q] = p / wo % ho * params->stride_h - params->pad_top;
            ix0[q] = p % wo * params->stride_w - params->pad_left;
        }
        for (oc0 = 0; oc0 < n_keep; oc0 += MT_BWD_W_OC) {
            const int32_t ocn = n_keep - oc0 < MT_BWD_W_OC ? n_keep - oc0 : MT_BWD_W_OC;
            int32_t o, t0, any = 0;
            o = 0;
            /* every channel, four per word: PKH + SXTB16 give their pair words, SXTAB16 the bias */
            if (!keep && (o_n & 3) == 0) {
                for (; o + 4 <= ocn; o += 4) {
                    int32_t s02 = 0, s13 = 0;
                    for (q = 0; q < 4; ++q) {
                        const int8_t *pa = e + (p0 + 2 * q) * o_n + oc0 + o;
                        const int32_t va = 2 * q < np ? mt_read_s8x4(pa) : 0;
                        const int32_t vb = 2 * q + 1 < np ? mt_read_s8x4(pa + o_n) : 0;
                        const int32_t lo = mt_pkhbt(va, vb), hi = pk_hi(va, vb);
                        eb[o * 4 + q] = mt_sxtb16(lo);
                        eb[(o + 1) * 4 + q] = mt_sxtb16_ror8(lo);
                        eb[(o + 2) * 4 + q] = mt_sxtb16(hi);
                        eb[(o + 3) * 4 + q] = mt_sxtb16_ror8(hi);
                        s02 = mt_sxtab16(mt_sxtab16(s02, va), vb); /* |lane| <= 8 * 127: no wrap */
                        s13 = mt_sxtab16_ror8(mt_sxtab16_ror8(s13, va), vb);
                    }
                    grad_bias[oc0 + o] += (int16_t)(s02 & 0xFFFF);
                    grad_bias[oc0 + o + 1] += (int16_t)(s13 & 0xFFFF);
                    grad_bias[oc0 + o + 2] += (int16_t)((uint32_t)s02 >> 16);
                    grad_bias[oc0 + o + 3] += (int16_t)((uint32_t)s13 >> 16);
                }
            }
            for (; o < ocn; ++o) { /* error pairs of the block; the bias gradient on the way */
                int32_t ev[8], s = 0;
                for (q = 0; q < 8; ++q) {
                    ev[q] = q < np ? e[(p0 + q) * o_n + (keep ? keep[oc0 + o] : oc0 + o)] : 0;
                    s += ev[q];
                }
                grad_bias[keep ? keep[oc0 + o] : oc0 + o] += s;
                for (q = 0; q < 4; ++q) {
                    eb[o * 4 + q] = (int32_t)(((uint32_t)ev[2 * q] & 0xFFFFu) | ((uint32_t)ev[2 * q + 1] << 16));
                }
            }
            for (o = 0; o < ocn; ++o) { /* count (bits 4..) and first two indices (bits 0-1, 2-3) of nonzero words */
                const int32_t *ep = eb + o * 4;
                const int32_t z0 = ep[0] != 0, z1 = ep[1] != 0, z2 = ep[2] != 0, z3 = ep[3] != 0;
                const int32_t n = z0 + z1 + z2 + z3;
                int32_t idx = 0, m = 0;
                any |= ep[0] | ep[1] | ep[2] | ep[3];
                if (n <= 2) {
                    if (z0) {
                        idx |= 0 << (2 * m++);
                    }
                    if (z1) {
                        idx |= 1 << (2 * m++);
                    }
                    if (z2) {
                        idx |= 2 << (2 * m++);
                    }
                    if (z3) {
                        idx |= 3 << (2 * m++);
                    }
                }
                nzq[o] = (uint8_t)(idx | (n << 4));
            }
            if (!any) {
                continue; /* exact: zero errors add nothing */
            }
            for (t0 = 0; t0 < kh * kw; t0 += taps_per) {
                const int32_t t1 = t0 + taps_per < kh * kw ? t0 + taps_per : kh * kw;
                int32_t c_lo;
                for (c_lo = 0; c_lo < c_n; c_lo += c_step) {
                    const int32_t cn = c_n - c_lo < c_step ? c_n - c_lo : c_step;
                    const int32_t k0 = t0 * c_n + c_lo, kc = (t1 - t0) * cn;
                    int32_t t;
                    for (t = t0; t < t1; ++t) {
                        fill_tap(input, h, w, c_n, zx, bq, iy0, ix0, np, t / kw, t % kw, c_lo, cn,
                                 xb + (t - t0) * cn * 4);
                    }
                    for (o = 0; o < ocn; ++o) {
                        const int32_t *ep = eb + o * 4;
                        int32_t *g = grad + (keep ? keep[oc0 + o] : oc0 + o) * kk + k0;
                        const int32_t q0 = nzq[o] & 3, q1 = (nzq[o] >> 2) & 3;
                        switch (nzq[o] >> 4) { /* nonzero pair words of the channel: 0, 1, 2 or more */
                        case 0:
                            break;
                        case 1:
                            grad_row1(xb + q0, kc, ep[q0], g);
                            break;
                        case 2:
                            grad_row2(xb + q0, xb + q1, kc, ep[q0], ep[q1], g);
                            break;
                        default:
                            grad_row(xb, kc, ep[0], ep[1], ep[2], ep[3], g);
                            break;
                        }
                    }
                }
            }
        }
    }
}

/* The dense kernel's filters: one input channel and a 3x3 kernel take mt_conv_c1.h's loop. */
MT_INLINE void bwd_w_dense_dsp(const mt_conv_params *params,
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
    bwd_w_dsp(params, keep, n, input_dims, input, output_dims, e, filter_dims, grad, grad_bias);
}

static const mt_conv_bwd_w_filters_fn dense_filters = bwd_w_dense_dsp;
static const mt_conv_bwd_w_filters_fn kept_filters = bwd_w_dsp;
#else  /* !MT_DSP */
static const mt_conv_bwd_w_filters_fn dense_filters = mt_conv2d_bwd_w_s8_s8_filters_ref;
static const mt_conv_bwd_w_filters_fn kept_filters = mt_conv2d_bwd_w_s8_s8_filters_ref;
#endif /* MT_DSP */

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
