/*
 * Transposed conv of prescaled int16 errors with int8 weights (Python twin:
 * fqt_kernels.conv2d_bwd_in_acc in mode "int" and fqt.FQT._to_err). Each input position gathers the
 * output positions whose window covers it, for a block of input channels at once (contiguous
 * weights, zero errors skipped), so no accumulator buffer beyond the stack block is needed.
 * DSP twin of train/fqt/mt_conv2d_bwd_in_s8_s16.c, bit-exact with it; the reference loop
 * (mt_conv2d_bwd_in_s8_s16_ref.h) does what the DSP paths decline, and all on a core without DSP.
 * DSP path (every output channel, packed block within MT_BWD_IN_PACK_WORDS): the reduction runs over
 * pairs of output channels, whose errors are already one word (e[o], e[o+1]); the weights of four
 * input channels are packed once per call on the stack as words (w[o, t, c], w[o+1, t, c]), so one
 * SMLAD does two MACs: per two pairs of output channels two error words, two LDM, eight SMLAD and
 * the loop (14 instructions per 16 MACs). With stride 1 across and O a multiple of 4, a kernel row's
 * taps run as one loop over consecutive output positions (the packed taps are in reverse order).
 * mt_conv2d_bwd_in_s8_s16_keep (partial updates) runs the same loops over the kept output channels:
 * its errors come compacted from mt_fqt_prescale_s16_keep ([positions, stride], zero columns past
 * n_keep), so the loops take the row stride as O and find each kept channel's filter through keep
 * (zero weights past n_keep); the pruned terms are 0, so the sums are the dense kernel's.
 * NOTE: |acc| <= 32512 * 127 * (taps * O) < 2^31 is checked by the exporter (taps * O <= 520); the
 * bound holds for partial sums in any order, so the DSP order gives the same sums.
 */
#include <stddef.h>

#include "mt_arch.h"
#include "mt_conv2d_bwd_in_s8_s16_ref.h"
#include "mt_fixedpoint.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"

#if MT_DSP
#define MT_BWD_IN_PACK_WORDS 640 /* 2560 bytes of stack: four input channels for taps * O <= 320 */

/*
 * Weights of input channels c0 .. c0 + cb - 1 (cb <= 4) as int16 pairs over the error columns
 * (o_n of them, channel keep[t] in column t, keep NULL: channel t; n of them hold a channel):
 * pack[((slot * nq + q) * 4 + k)] = (w[keep[2q], i, j, c0 + k], w[keep[2q + 1], i, j, c0 + k]), zero
 * past n or cb, with slot = i * kw + (kw - 1 - j): the taps of a kernel row in reverse order, so that
 * with stride 1 a row's taps meet the errors of consecutive output positions (one contiguous run of both).
 */
MT_INLINE void pack_block(const int8_t *filter, const int32_t *keep, int32_t n, int32_t o_n, int32_t kh, int32_t kw,
                          int32_t c_n, int32_t c0, int32_t cb, int32_t *pack)
{
    const int32_t nq = (o_n + 1) / 2, row = kh * kw * c_n;
    int32_t i, j, q, k;
    for (i = 0; i < kh; ++i) {
        for (j = kw - 1; j >= 0; --j) {
            for (q = 0; q < nq; ++q) {
                const int32_t tap = (i * kw + j) * c_n + c0;
                const int8_t *w0, *w1;
                if (!keep) { /* every channel: column 2q always holds one */
                    w0 = filter + 2 * q * row + tap;
                    w1 = 2 * q + 1 < o_n ? w0 + row : NULL;
                } else {
                    w0 = 2 * q < n ? filter + keep[2 * q] * row + tap : NULL;
                    w1 = 2 * q + 1 < n ? filter + keep[2 * q + 1] * row + tap : NULL;
                }
                for (k = 0; k < 4; ++k) {
                    const int32_t lo = k < cb && w0 ? w0[k] : 0, hi = k < cb && w1 ? w1[k] : 0;
                    *pack++ = (int32_t)(((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16));
                }
            }
        }
    }
}

/*
 * a[k] += sum over n2 * 2 pairs of output channels of (e[2q], e[2q + 1]) . pw[q * 4 + k]: per two pairs
 * two error words, eight packed weight words (two LDM on the core), eight SMLAD: 14 instructions per
 * 16 MACs with the loop. A pair of zero errors (more than half of them after the max-pool routing
 * and the ReLU mask) costs its load, CBZ, the pointer step and a branch instead (exact).
 */
MT_INLINE void tap_dot4(const int16_t *pe, const int32_t *pw, int32_t n2, int32_t *a0, int32_t *a1, int32_t *a2,
                        int32_t *a3)
{
#if defined(MT_DSP_NATIVE)
    int32_t e;
    __asm__ volatile("1:\n\t"
                     "ldr   %[e], [%[pe]], #4\n\t"
                     "cbz   %[e], 5f\n\t"
                     "ldmia %[pw]!, {r8, r9, r10, r11}\n\t"
                     "smlad %[a0], r8, %[e], %[a0]\n\t"
                     "smlad %[a1], r9, %[e], %[a1]\n\t"
                     "smlad %[a2], r10, %[e], %[a2]\n\t"
                     "smlad %[a3], r11, %[e], %[a3]\n"
                     "2:\n\t"
                     "ldr   %[e], [%[pe]], #4\n\t"
                     "cbz   %[e], 6f\n\t"
                     "ldmia %[pw]!, {r8, r9, r10, r11}\n\t"
                     "smlad %[a0], r8, %[e], %[a0]\n\t"
                     "smlad %[a1], r9, %[e], %[a1]\n\t"
                     "smlad %[a2], r10, %[e], %[a2]\n\t"
                     "smlad %[a3], r11, %[e], %[a3]\n"
                     "3:\n\t"
                     "subs  %[n], %[n], #1\n\t"
                     "bne   1b\n\t"
                     "b     7f\n"
                     "5:\n\t"
                     "adds  %[pw], %[pw], #16\n\t"
                     "b     2b\n"
                     "6:\n\t"
                     "adds  %[pw], %[pw], #16\n\t"
                     "b     3b\n"
                     "7:"
                     : [a0] "+r"(*a0), [a1] "+r"(*a1), [a2] "+r"(*a2), [a3] "+r"(*a3), [e] "=&l"(e),
                       [pe] "+r"(pe), [pw] "+r"(pw), [n] "+r"(n2)
                     :
                     : "r8", "r9", "r10", "r11", "cc", "memory");
#else  /* !defined(MT_DSP_NATIVE) */
    int32_t x0 = *a0, x1 = *a1, x2 = *a2, x3 = *a3;
    for (; n2 > 0; --n2) {
        const int32_t e0 = mt_read_s16x2(pe), e1 = mt_read_s16x2(pe + 2);
        x0 = mt_smlad(pw[0], e0, x0);
        x1 = mt_smlad(pw[1], e0, x1);
        x2 = mt_smlad(pw[2], e0, x2);
        x3 = mt_smlad(pw[3], e0, x3);
        x0 = mt_smlad(pw[4], e1, x0);
        x1 = mt_smlad(pw[5], e1, x1);
        x2 = mt_smlad(pw[6], e1, x2);
        x3 = mt_smlad(pw[7], e1, x3);
        pe += 4;
        pw += 8;
    }
    *a0 = x0;
    *a1 = x1;
    *a2 = x2;
    *a3 = x3;
#endif /* MT_DSP_NATIVE */
}

/* Requantized error of an accumulator, prepared once per call (mt_requantize_fast_single where it can;
   errors round "single" in every mode, FQT's specification). */
typedef struct {
    int32_t m, shift, sh, c1, fast;
} rq_err;

MT_INLINE int8_t rq_err_apply(const rq_err *r, int32_t v)
{
    int32_t y;
    if (!r->fast) {
        return mt_requantize_single(v, r->m, r->shift, 0, -127, 127);
    }
    y = mt_requantize_fast_single(v, r->m, r->sh, r->c1); /* clamp [-128, 127], then the error's -127 */
    return (int8_t)(y < -127 ? -127 : y);
}

#define MT_BWD_IN_ENTRIES 1536 /* listed nonzero error pairs of one sample (1.5 KB of stack), else the dense loop */
#define MT_BWD_IN_POS 256      /* output positions of the list index (0.5 KB of stack) */

/*
 * a[k] += sum over the listed nonzero error pairs of (e[2q], e[2q + 1]) . packed weights. An entry is
 * E = ox * (O / 2) + q < 256, the pair's index in its output row: its error word is at pe + 4 * E bytes,
 * its packed weights at pw + 16 * E bytes, pw = pack + (slot - ox) * 16 * (O / 2) bytes: the packed
 * slots of a kernel row run in reverse, so with stride 1 across, slot - ox is the same for every tap
 * of the row and a row's taps read one contiguous run of entries. Per pair: the entry, the error word,
 * two LDRD of packed weights, four SMLAD and the loop: 11 instructions per 8 MACs; zero pairs cost
 * nothing.
 */
MT_INLINE void run_list4(const int16_t *pe, intptr_t pw, const uint8_t *li, const uint8_t *end, int32_t *a0,
                         int32_t *a1, int32_t *a2, int32_t *a3)
{
#if defined(MT_DSP_NATIVE)
    int32_t t, e, u, v;
    __asm__ volatile("1:\n\t"
                     "ldrb  %[t], [%[li]], #1\n\t"
                     "ldr   %[e], [%[pe], %[t], lsl #2]\n\t"
                     "add   %[t], %[pw], %[t], lsl #4\n\t"
                     "ldrd  %[u], %[v], [%[t]]\n\t"
                     "smlad %[a0], %[u], %[e], %[a0]\n\t"
                     "smlad %[a1], %[v], %[e], %[a1]\n\t"
                     "ldrd  %[u], %[v], [%[t], #8]\n\t"
                     "smlad %[a2], %[u], %[e], %[a2]\n\t"
                     "smlad %[a3], %[v], %[e], %[a3]\n\t"
                     "cmp   %[li], %[end]\n\t"
                     "bne   1b"
                     : [a0] "+r"(*a0), [a1] "+r"(*a1), [a2] "+r"(*a2), [a3] "+r"(*a3), [t] "=&r"(t), [e] "=&r"(e),
                       [u] "=&r"(u), [v] "=&r"(v), [li] "+r"(li)
                     : [pe] "r"(pe), [pw] "r"(pw), [end] "r"(end)
                     : "cc", "memory");
#else  /* !defined(MT_DSP_NATIVE) */
    for (; li != end; ++li) {
        const int32_t q = *li;
        const int32_t e = mt_read_s16x2(pe + 2 * q);
        const int32_t *pk = (const int32_t *)(void *)(pw + 16 * (intptr_t)q);
        *a0 = mt_smlad(pk[0], e, *a0);
        *a1 = mt_smlad(pk[1], e, *a1);
        *a2 = mt_smlad(pk[2], e, *a2);
        *a3 = mt_smlad(pk[3], e, *a3);
    }
#endif /* MT_DSP_NATIVE */
}

/*
 * bwd_in_dsp over the nonzero error pairs only, for O even: after the max-pool routing and the ReLU
 * mask about three pairs in four are zero. Per sample the nonzero pairs are listed once in position
 * order (first[p]: index of position p's first entry); each kernel row of each input pixel runs
 * run_list4 over its positions' entries. Returns 0 when a sample has more nonzero pairs than the
 * list holds (nothing written; the dense loop runs instead). Same sums, same requantization.
 */
MT_INLINE int bwd_in_lists(const mt_conv_params *params,
                           const int32_t *keep,
                           int32_t n_keep,
                           int32_t o_n,
                           const mt_dims *output_dims,
                           const int16_t *e16,
                           const mt_dims *filter_dims,
                           const int8_t *filter,
                           const mt_dims *input_dims,
                           const rq_err *rq,
                           int8_t *e_x,
                           int32_t *acc_min,
                           int32_t *acc_max,
                           int32_t *pack)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t sh = params->stride_h, sw = params->stride_w, pt = params->pad_top, pl = params->pad_left;
    const int32_t nq = o_n / 2;
    uint8_t ent[MT_BWD_IN_ENTRIES];
    uint16_t first[MT_BWD_IN_POS + 1];
    int32_t lo = *acc_min, hi = *acc_max;
    int32_t b, y, x, c0, p, q, n;
    for (b = 0; b < input_dims->n; ++b) { /* the lists fit every sample, or the dense loop runs */
        const int16_t *eb = e16 + b * ho * wo * o_n;
        for (n = 0, p = 0; p < ho * wo; ++p) {
            for (q = 0; q < nq; ++q) {
                n += mt_read_s16x2(eb + p * o_n + 2 * q) != 0;
            }
        }
        if (n > MT_BWD_IN_ENTRIES) {
            return 0;
        }
    }
    for (b = 0; b < input_dims->n; ++b) {
        const int16_t *eb = e16 + b * ho * wo * o_n;
        for (n = 0, p = 0; p < ho * wo; ++p) {
            const int16_t *pe = eb + p * o_n;
            const int32_t row_off = (p % wo) * nq; /* index of position p's first pair in its output row */
            first[p] = (uint16_t)n;
            for (q = 0; q < nq; ++q) {
                if (mt_read_s16x2(pe + 2 * q) != 0) {
                    ent[n++] = (uint8_t)(row_off + q);
                }
            }
        }
        first[ho * wo] = (uint16_t)n;
        for (c0 = 0; c0 < c_n; c0 += 4) {
            const int32_t cb = c_n - c0 < 4 ? c_n - c0 : 4;
            pack_block(filter, keep, n_keep, o_n, kh, kw, c_n, c0, cb, pack);
            for (y = 0; y < h; ++y) {
                for (x = 0; x < w; ++x) {
                    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                    int32_t i, j, k;
                    for (i = 0; i < kh; ++i) {
                        const int32_t ty = y + pt - i;
                        const int16_t *erow;
                        int32_t oy;
                        if (ty < 0 || (sh != 1 && ty % sh != 0) || (oy = ty / sh) >= ho) {
                            continue;
                        }
                        erow = eb + oy * wo * o_n;
                        if (sw == 1) { /* taps j_lo .. j_hi: positions x + pl - j_hi .. x + pl - j_lo, one run */
                            const int32_t j_lo = x + pl - (wo - 1) > 0 ? x + pl - (wo - 1) : 0;
                            const int32_t j_hi = x + pl < kw - 1 ? x + pl : kw - 1;
                            const int32_t ox0 = x + pl - j_hi, ox1 = x + pl - j_lo;
                            const uint8_t *l0 = ent + first[oy * wo + ox0], *l1 = ent + first[oy * wo + ox1 + 1];
                            /* slot of tap j = i * kw + kw - 1 - j = ox + i * kw + kw - 1 - x - pl */
                            if (j_lo <= j_hi && l0 != l1) {
                                run_list4(erow, (intptr_t)pack + 16 * nq * (i * kw + kw - 1 - x - pl), l0, l1, &a0,
                                          &a1, &a2, &a3);
                            }
                            continue;
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t tx = x + pl - j;
                            int32_t ox;
                            if (tx < 0 || tx % sw != 0 || (ox = tx / sw) >= wo) {
                                continue;
                            }
                            if (first[oy * wo + ox] != first[oy * wo + ox + 1]) {
                                run_list4(erow, (intptr_t)pack + 16 * nq * (i * kw + kw - 1 - j - ox),
                                          ent + first[oy * wo + ox], ent + first[oy * wo + ox + 1], &a0, &a1, &a2,
                                          &a3);
                            }
                        }
                    }
                    for (k = 0; k < cb; ++k) {
                        const int32_t v = k == 0 ? a0 : (k == 1 ? a1 : (k == 2 ? a2 : a3));
                        lo = v < lo ? v : lo;
                        hi = v > hi ? v : hi;
                        if (e_x) {
                            e_x[((b * h + y) * w + x) * c_n + c0 + k] = rq_err_apply(rq, v);
                        }
                    }
                }
            }
        }
    }
    *acc_min = lo;
    *acc_max = hi;
    return 1;
}

MT_INLINE void bwd_in_dsp(const mt_conv_params *params,
                          const int32_t *keep,
                          int32_t n_keep,
                          int32_t o_n,
                          const mt_dims *output_dims,
                          const int16_t *e16,
                          const mt_dims *filter_dims,
                          const int8_t *filter,
                          const mt_dims *input_dims,
                          int32_t multiplier,
                          int32_t shift,
                          int8_t *e_x,
                          int32_t *acc_min,
                          int32_t *acc_max,
                          int32_t *pack)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t sh = params->stride_h, sw = params->stride_w, pt = params->pad_top, pl = params->pad_left;
    const int32_t nq = (o_n + 1) / 2, nqf = o_n / 2;
    /* stride 1 across and O a multiple of 4 (not 0): a kernel row's valid taps are one run of the asm loop */
    const int32_t runs = sw == 1 && (o_n & 3) == 0 && o_n > 0;
    int32_t lo = *acc_min, hi = *acc_max;
    int32_t b, y, x, c0;
    rq_err rq;
    rq.m = multiplier;
    rq.shift = shift;
    rq.fast = mt_requant_fast_ok_single(multiplier, shift);
    rq.sh = -1 - shift;
    rq.c1 = rq.fast ? mt_requant_c1(rq.sh, 0) : 0;
    for (c0 = 0; c0 < c_n; c0 += 4) {
        const int32_t cb = c_n - c0 < 4 ? c_n - c0 : 4;
        pack_block(filter, keep, n_keep, o_n, kh, kw, c_n, c0, cb, pack);
        for (b = 0; b < input_dims->n; ++b) {
            for (y = 0; y < h; ++y) {
                for (x = 0; x < w; ++x) {
                    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                    int32_t i, j, k;
                    for (i = 0; i < kh; ++i) {
                        const int32_t ty = y + pt - i;
                        const int16_t *erow;
                        const int32_t *prow = pack + i * kw * nq * 4;
                        int32_t oy;
                        if (ty < 0 || (sh != 1 && ty % sh != 0) || (oy = ty / sh) >= ho) {
                            continue;
                        }
                        erow = e16 + (b * ho + oy) * wo * o_n;
                        if (runs) { /* taps j_lo .. j_hi read output positions x + pl - j_hi .. x + pl - j_lo */
                            const int32_t j_lo = x + pl - (wo - 1) > 0 ? x + pl - (wo - 1) : 0;
                            const int32_t j_hi = x + pl < kw - 1 ? x + pl : kw - 1;
                            if (j_lo <= j_hi) {
                                tap_dot4(erow + (x + pl - j_hi) * o_n, prow + (kw - 1 - j_hi) * nq * 4,
                                         (j_hi - j_lo + 1) * (o_n >> 2), &a0, &a1, &a2, &a3);
                            }
                            continue;
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t tx = x + pl - j;
                            const int16_t *pe;
                            const int32_t *pw;
                            int32_t ox, q;
                            if (tx < 0 || (sw != 1 && tx % sw != 0) || (ox = tx / sw) >= wo) {
                                continue;
                            }
                            pe = erow + ox * o_n;
                            pw = prow + (kw - 1 - j) * nq * 4;
                            q = 2 * (nqf / 2);
                            if (q > 0) {
                                tap_dot4(pe, pw, nqf / 2, &a0, &a1, &a2, &a3);
                                pe += 2 * q;
                                pw += 4 * q;
                            }
                            for (; q < nq; ++q) { /* last pairs; with O odd the last one's second error is 0 */
                                const int32_t e0 = q < nqf ? mt_read_s16x2(pe) : (int32_t)(uint16_t)pe[0];
                                a0 = mt_smlad(pw[0], e0, a0);
                                a1 = mt_smlad(pw[1], e0, a1);
                                a2 = mt_smlad(pw[2], e0, a2);
                                a3 = mt_smlad(pw[3], e0, a3);
                                pe += 2;
                                pw += 4;
                            }
                        }
                    }
                    for (k = 0; k < cb; ++k) {
                        const int32_t v = k == 0 ? a0 : (k == 1 ? a1 : (k == 2 ? a2 : a3));
                        lo = v < lo ? v : lo;
                        hi = v > hi ? v : hi;
                        if (e_x) {
                            e_x[((b * h + y) * w + x) * c_n + c0 + k] = rq_err_apply(&rq, v);
                        }
                    }
                }
            }
        }
    }
    *acc_min = lo;
    *acc_max = hi;
}

/*
 * The DSP paths over o_n error columns (channel keep[t] in column t, keep NULL: channel t; n_keep of
 * them hold a channel): the nonzero-pair lists where they fit, else the dense loop. Returns 0 (nothing
 * done) when the packed weights exceed the stack block.
 */
MT_INLINE int bwd_in_dsp_any(const mt_conv_params *params,
                             const int32_t *keep,
                             int32_t n_keep,
                             int32_t o_n,
                             const mt_dims *output_dims,
                             const int16_t *e16,
                             const mt_dims *filter_dims,
                             const int8_t *filter,
                             const mt_dims *input_dims,
                             int32_t multiplier,
                             int32_t shift,
                             int8_t *e_x,
                             int32_t *acc_min,
                             int32_t *acc_max)
{
    int32_t pack[MT_BWD_IN_PACK_WORDS];
    if (filter_dims->h * filter_dims->w * ((o_n + 1) / 2) * 4 > MT_BWD_IN_PACK_WORDS) {
        return 0;
    }
    if ((o_n & 1) == 0 && output_dims->h * output_dims->w <= MT_BWD_IN_POS && output_dims->w * (o_n / 2) <= 256) {
        rq_err rq;
        rq.m = multiplier;
        rq.shift = shift;
        rq.fast = mt_requant_fast_ok_single(multiplier, shift);
        rq.sh = -1 - shift;
        rq.c1 = rq.fast ? mt_requant_c1(rq.sh, 0) : 0;
        if (bwd_in_lists(params, keep, n_keep, o_n, output_dims, e16, filter_dims, filter, input_dims, &rq, e_x,
                         acc_min, acc_max, pack)) {
            return 1;
        }
    }
    bwd_in_dsp(params, keep, n_keep, o_n, output_dims, e16, filter_dims, filter, input_dims, multiplier, shift, e_x,
               acc_min, acc_max, pack);
    return 1;
}

/* The DSP paths both kernels try first. */
static const mt_bwd_in_fast_fn fast_cols = bwd_in_dsp_any;
#else  /* !MT_DSP */
static const mt_bwd_in_fast_fn fast_cols = NULL;
#endif /* MT_DSP */

mt_status mt_conv2d_bwd_in_s8_s16(const mt_conv_params *params,
                                  const int32_t *channels,
                                  int32_t n_channels,
                                  const mt_dims *output_dims,
                                  const int16_t *e16,
                                  const mt_dims *filter_dims,
                                  const int8_t *filter,
                                  const mt_dims *input_dims,
                                  int32_t multiplier,
                                  int32_t shift,
                                  int8_t *e_x,
                                  int32_t *acc_min,
                                  int32_t *acc_max)
{
    return mt_conv2d_bwd_in_s8_s16_with(params, channels, n_channels, output_dims, e16, filter_dims, filter,
                                        input_dims, multiplier, shift, e_x, acc_min, acc_max, fast_cols);
}

mt_status mt_conv2d_bwd_in_s8_s16_keep(const mt_conv_params *params,
                                       const int32_t *keep,
                                       int32_t n_keep,
                                       const mt_dims *output_dims,
                                       const int16_t *e16,
                                       const mt_dims *filter_dims,
                                       const int8_t *filter,
                                       const mt_dims *input_dims,
                                       int32_t multiplier,
                                       int32_t shift,
                                       int8_t *e_x,
                                       int32_t *acc_min,
                                       int32_t *acc_max)
{
    return mt_conv2d_bwd_in_s8_s16_keep_with(params, keep, n_keep, output_dims, e16, filter_dims, filter, input_dims,
                                             multiplier, shift, e_x, acc_min, acc_max, fast_cols);
}
