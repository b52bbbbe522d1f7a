/*
 * mcutrain runtime: one-channel-input paths of the FQT conv forward and weight gradient (see
 * mt_conv_c1.h for why). DSP builds only; exact integer arithmetic, so every path gives the
 * general kernels' results.
 *
 * Forward. One output pixel's column (its kh * kw centred inputs as at most five int16 pairs)
 * stays in registers while every output channel's record streams past it: one LDM brings the
 * five weight pairs and the bias, five SMLAD do the dot product, a second LDM brings the
 * requantization constants and the channel's running extremes, and MT_ASM_REQUANT_FLOOR + STRB
 * requantize and store (mt_requantize_floor of the library's mode: SMMLA + ASR + SSAT, or in
 * "tflite" SMMLAR + QADD + ASR + SSAT with the result register as its scratch). The extremes are kept as (min, max - min): one
 * unsigned compare of acc - min against the width tells whether acc lies inside, which after
 * the first few pixels it almost always does (the update is out of line). 16 instructions per
 * output channel (17 in "tflite"); the pixel's column comes from kh padded int16 rows built once per output row.
 *
 * Weight gradient (3x3, stride 1). G[o, t] = sum_p e[p, o] * x[p, t] runs over pairs of
 * horizontally adjacent output pixels, so that for tap (i, j) the pair (x[p, t], x[p + 1, t]) is
 * two adjacent int16 values of a padded centred copy of the image (one LDR at a fixed offset,
 * the copy has a fixed row stride) and the errors are one pair word (e[p, o], e[p + 1, o]):
 * one SMLAD per tap and pixel pair, the nine sums in registers for a whole output row of one
 * channel. A pair of zero errors is skipped (max-pool routing leaves one error in four, so
 * about half the pairs; exact: zeros add nothing).
 */
#include <string.h>

#include "mt_arch.h"
#include "mt_conv_c1.h"
#include "mt_fixedpoint.h"

#if MT_DSP

#define C1_PAIRS 5   /* int16 pairs of a column */
#define C1_REC 11    /* words of a channel record: 5 weight pairs, bias, m, c1, sh, min, max - min */
#define C1_OMAX 32   /* output channels (records on the stack: 32 x 44 bytes) */
#define C1_ROWMAX 96 /* int16 values of a padded input row (kh rows on the stack) */
#define C1_KHMAX 10

/*
 * Pairing of a kh x kw kernel (C == 1) into column words: per kernel row the taps (j, j + 1) for
 * even j < kw - 1; then the rows' last taps when kw is odd, two by two (a zero fills the last).
 * Returns the number of words (<= C1_PAIRS for the shapes taken).
 */
static int32_t c1_words(int32_t kh, int32_t kw)
{
    return kh * (kw / 2) + (kh * (kw & 1) + 1) / 2;
}

/* The column words of one pixel from its kh rows (rows[i] at the pixel's first tap). */
MT_INLINE void c1_column(const int16_t *const *rows, int32_t off, int32_t kh, int32_t kw, int32_t *col)
{
    int32_t n = 0, i, j;
    if (kh == 3 && kw == 3) {
        col[0] = mt_read_s16x2(rows[0] + off);
        col[1] = mt_read_s16x2(rows[1] + off);
        col[2] = mt_read_s16x2(rows[2] + off);
        col[3] = mt_pkhbt(rows[0][off + 2], rows[1][off + 2]);
        col[4] = mt_pkhbt(rows[2][off + 2], 0);
        return;
    }
    for (i = 0; i < kh; ++i) {
        for (j = 0; j + 1 < kw; j += 2) {
            col[n++] = mt_read_s16x2(rows[i] + off + j);
        }
    }
    if (kw & 1) {
        for (i = 0; i < kh; i += 2) {
            col[n++] = mt_pkhbt(rows[i][off + kw - 1], i + 1 < kh ? rows[i + 1][off + kw - 1] : 0);
        }
    }
    while (n < C1_PAIRS) {
        col[n++] = 0;
    }
}

/* The same pairing of weight row o (int8 [kh, kw]). */
static void c1_weights(const int8_t *w, int32_t kh, int32_t kw, int32_t *out)
{
    int32_t n = 0, i, j;
    for (i = 0; i < kh; ++i) {
        for (j = 0; j + 1 < kw; j += 2) {
            out[n++] = mt_pkhbt(w[i * kw + j], w[i * kw + j + 1]);
        }
    }
    if (kw & 1) {
        for (i = 0; i < kh; i += 2) {
            out[n++] = mt_pkhbt(w[i * kw + kw - 1], i + 1 < kh ? w[(i + 1) * kw + kw - 1] : 0);
        }
    }
    while (n < C1_PAIRS) {
        out[n++] = 0;
    }
}

#if defined(MT_DSP_NATIVE)
/* Every channel record [rec, end) against one column: see the file comment. */
void mt_c1_chan_floor(int32_t *rec, int8_t *out, const int32_t *end, const int32_t *col);
__asm__(".syntax unified\n\t"
        ".thumb\n\t"
        ".text\n\t"
        ".align 2\n\t"
        ".global mt_c1_chan_floor\n\t"
        ".thumb_func\n\t"
        ".type mt_c1_chan_floor, %function\n"
        "mt_c1_chan_floor:\n\t"
        "push  {r4-r11, lr}\n\t"
        "ldm   r3, {r4-r8}\n"
        "1:\n\t"
        "ldm   r0!, {r3, r9, r10, r11, r12, lr}\n\t"
        "smlad lr, r3, r4, lr\n\t"
        "smlad lr, r9, r5, lr\n\t"
        "smlad lr, r10, r6, lr\n\t"
        "smlad lr, r11, r7, lr\n\t"
        "smlad lr, r12, r8, lr\n\t"
        "ldm   r0!, {r3, r9, r10, r11, r12}\n\t"
        MT_ASM_REQUANT_FLOOR("r3", "r3", "lr", "r3", "r9", "r10")
        "strb  r3, [r1], #1\n\t"
        "sub   r9, lr, r11\n\t"
        "cmp   r9, r12\n\t"
        "bhi   3f\n"
        "2:\n\t"
        "cmp   r0, r2\n\t"
        "bne   1b\n\t"
        "pop   {r4-r11, pc}\n"
        "3:\n\t"
        "add   r12, r12, r11\n\t"
        "cmp   lr, r11\n\t"
        "it    lt\n\t"
        "movlt r11, lr\n\t"
        "cmp   lr, r12\n\t"
        "it    gt\n\t"
        "movgt r12, lr\n\t"
        "sub   r12, r12, r11\n\t"
        "strd  r11, r12, [r0, #-8]\n\t"
        "b     2b\n\t"
        ".size mt_c1_chan_floor, . - mt_c1_chan_floor");
#else  /* !defined(MT_DSP_NATIVE) */
static void mt_c1_chan_floor(int32_t *rec, int8_t *out, const int32_t *end, const int32_t *col)
{
    for (; rec != end; rec += C1_REC) {
        int32_t acc = rec[5];
        int32_t k;
        for (k = 0; k < C1_PAIRS; ++k) {
            acc = mt_smlad(rec[k], col[k], acc);
        }
        *out++ = (int8_t)mt_requantize_floor(acc, rec[6], rec[8], rec[7]);
        if ((uint32_t)acc - (uint32_t)rec[9] > (uint32_t)rec[10]) {
            int32_t mn = rec[9], mx = (int32_t)((uint32_t)rec[9] + (uint32_t)rec[10]);
            mn = acc < mn ? acc : mn;
            mx = acc > mx ? acc : mx;
            rec[9] = mn;
            rec[10] = (int32_t)((uint32_t)mx - (uint32_t)mn);
        }
    }
}
#endif /* MT_DSP_NATIVE */

int mt_conv_c1_fwd(const mt_conv_params *params,
                   const mt_per_channel_quant *quant,
                   const mt_dims *input_dims,
                   const int8_t *input,
                   const mt_dims *filter_dims,
                   const int8_t *filter,
                   const int32_t *bias,
                   const mt_dims *output_dims,
                   int8_t *output,
                   int32_t *acc_min,
                   int32_t *acc_max)
{
    const int32_t hi_ = input_dims->h, wi = input_dims->w;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t sh = params->stride_h, sw = params->stride_w;
    const int32_t wp = (wo - 1) * sw + kw; /* int16 values of a padded row */
    const int32_t zx = params->input_zero_point;
    int32_t rec[C1_OMAX * C1_REC];
    int16_t rowbuf[C1_KHMAX * C1_ROWMAX];
    const int16_t *rows[C1_KHMAX];
    int32_t col[C1_PAIRS];
    int32_t o, b, y, x, i;
    if (params->groups != 1 || input_dims->c != 1 || filter_dims->c != 1 || kh * kw > 2 * C1_PAIRS ||
        kh > C1_KHMAX || c1_words(kh, kw) > C1_PAIRS || o_n < 1 || o_n > C1_OMAX || wp > C1_ROWMAX ||
        params->output_zero_point != -128 || params->act_min != -128 || params->act_max != 127) {
        return 0;
    }
    for (o = 0; o < o_n; ++o) {
        if (!mt_requant_fast_ok(quant->multiplier[o], quant->shift[o])) {
            return 0;
        }
    }
    for (o = 0; o < o_n; ++o) {
        int32_t *r = rec + o * C1_REC;
        const int32_t s = mt_requant_sh(quant->shift[o]);
        c1_weights(filter + o * kh * kw, kh, kw, r);
        r[5] = bias[o];
        r[6] = mt_requant_mult(quant->multiplier[o]);
        r[7] = mt_requant_c1(s, -128);
        r[8] = s;
        r[9] = acc_min[o];
        r[10] = (int32_t)((uint32_t)acc_max[o] - (uint32_t)acc_min[o]);
        if (acc_min[o] > acc_max[o]) { /* no extremes yet: the next accumulator is both */
            r[9] = INT32_MAX;
            r[10] = 0;
        }
    }
    for (b = 0; b < input_dims->n; ++b) {
        int32_t next = 0; /* the next padded row to build (padded row r: image row r - pad_top) */
        for (y = 0; y < ho; ++y) {
            int8_t *out = output + (b * ho + y) * wo * o_n;
            for (; next < y * sh + kh; ++next) { /* each padded centred row once, in a ring of kh slots */
                const int32_t iy = next - params->pad_top;
                int16_t *rw = rowbuf + (next % kh) * C1_ROWMAX;
                const int32_t x0 = params->pad_left < wp ? params->pad_left : wp;
                const int32_t x1 = params->pad_left + wi < wp ? params->pad_left + wi : wp;
                const int8_t *src;
                int32_t xx;
                if (iy < 0 || iy >= hi_) {
                    memset(rw, 0, (size_t)wp * 2u);
                    continue;
                }
                src = input + (b * hi_ + iy) * wi;
                for (xx = 0; xx < x0; ++xx) {
                    rw[xx] = 0;
                }
                for (; xx < x1; ++xx) {
                    rw[xx] = (int16_t)(src[xx - params->pad_left] - zx);
                }
                for (; xx < wp; ++xx) {
                    rw[xx] = 0;
                }
            }
            for (i = 0; i < kh; ++i) {
                rows[i] = rowbuf + ((y * sh + i) % kh) * C1_ROWMAX;
            }
            for (x = 0; x < wo; ++x) {
                c1_column(rows, x * sw, kh, kw, col);
                if (b == 0 && y == 0 && x == 0) {
                    for (o = 0; o < o_n; ++o) { /* empty extremes start at this pixel's accumulator */
                        int32_t *r = rec + o * C1_REC;
                        if (r[9] == INT32_MAX && r[10] == 0 && acc_min[o] > acc_max[o]) {
                            int32_t acc = r[5], k;
                            for (k = 0; k < C1_PAIRS; ++k) {
                                acc = mt_smlad(r[k], col[k], acc);
                            }
                            r[9] = acc;
                        }
                    }
                }
                mt_c1_chan_floor(rec, out + x * o_n, rec + o_n * C1_REC, col);
            }
        }
    }
    for (o = 0; o < o_n; ++o) {
        const int32_t *r = rec + o * C1_REC;
        acc_min[o] = r[9];
        acc_max[o] = (int32_t)((uint32_t)r[9] + (uint32_t)r[10]);
    }
    return 1;
}

/* The weight gradient's padded image: fixed row stride, so each tap is an immediate offset. */
#define C1_XS 32   /* int16 values per padded row */
#define C1_XROWS 32

#if defined(MT_DSP_NATIVE)
/*
 * g[0..8] += sum over the n pixel pairs q of (e pair word ep[q]) . (x pair at xr + 2q + tap offset),
 * taps (i, j) at offset i * C1_XS + j; pairs of zero errors skipped.
 */
void mt_c1_bwdw_row(const int32_t *ep, const int16_t *xr, int32_t n, int32_t *g);
__asm__(".syntax unified\n\t"
        ".thumb\n\t"
        ".text\n\t"
        ".align 2\n\t"
        ".global mt_c1_bwdw_row\n\t"
        ".thumb_func\n\t"
        ".type mt_c1_bwdw_row, %function\n"
        "mt_c1_bwdw_row:\n\t"
        "push  {r3-r11, lr}\n\t"
        "ldm   r3, {r4-r12}\n"
        "1:\n\t"
        "ldr   r3, [r0], #4\n\t"
        "cbz   r3, 2f\n\t"
        "ldr   lr, [r1, #0]\n\t"
        "smlad r4, lr, r3, r4\n\t"
        "ldr   lr, [r1, #2]\n\t"
        "smlad r5, lr, r3, r5\n\t"
        "ldr   lr, [r1, #4]\n\t"
        "smlad r6, lr, r3, r6\n\t"
        "ldr   lr, [r1, #64]\n\t"
        "smlad r7, lr, r3, r7\n\t"
        "ldr   lr, [r1, #66]\n\t"
        "smlad r8, lr, r3, r8\n\t"
        "ldr   lr, [r1, #68]\n\t"
        "smlad r9, lr, r3, r9\n\t"
        "ldr   lr, [r1, #128]\n\t"
        "smlad r10, lr, r3, r10\n\t"
        "ldr   lr, [r1, #130]\n\t"
        "smlad r11, lr, r3, r11\n\t"
        "ldr   lr, [r1, #132]\n\t"
        "smlad r12, lr, r3, r12\n"
        "2:\n\t"
        "adds  r1, r1, #4\n\t"
        "subs  r2, r2, #1\n\t"
        "bne   1b\n\t"
        "ldr   r3, [sp]\n\t"
        "stm   r3, {r4-r12}\n\t"
        "pop   {r3-r11, pc}\n\t"
        ".size mt_c1_bwdw_row, . - mt_c1_bwdw_row");
#else  /* !defined(MT_DSP_NATIVE) */
static void mt_c1_bwdw_row(const int32_t *ep, const int16_t *xr, int32_t n, int32_t *g)
{
    int32_t q, i, j;
    for (q = 0; q < n; ++q, xr += 2) {
        if (ep[q] == 0) {
            continue;
        }
        for (i = 0; i < 3; ++i) {
            for (j = 0; j < 3; ++j) {
                g[i * 3 + j] = mt_smlad(mt_read_s16x2(xr + i * C1_XS + j), ep[q], g[i * 3 + j]);
            }
        }
    }
}
#endif /* MT_DSP_NATIVE */

/* (a.hi, b.hi) as one word (PKHTB with ASR #16). */
MT_INLINE int32_t c1_pk_hi(int32_t a, int32_t b)
{
    return (int32_t)(((uint32_t)a >> 16) | ((uint32_t)b & 0xFFFF0000u));
}

int mt_conv_c1_bwd_w(const mt_conv_params *params,
                     const mt_dims *input_dims,
                     const int8_t *input,
                     const mt_dims *output_dims,
                     const int8_t *e,
                     const mt_dims *filter_dims,
                     int32_t *grad,
                     int32_t *grad_bias)
{
    const int32_t hi_ = input_dims->h, wi = input_dims->w;
    const int32_t o_n = filter_dims->n;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t np = (wo + 1) / 2; /* pixel pairs of an output row (the last may be half) */
    const int32_t zx = params->input_zero_point;
    /* +2: the last pair of an odd row reads one value past its row (times a zero error) */
    int16_t img[C1_XROWS * C1_XS + 2];
    int32_t ep[4 * (C1_XS / 2)];
    int32_t b, y, x, o, c, q;
    if (params->groups != 1 || input_dims->c != 1 || filter_dims->c != 1 || filter_dims->h != 3 ||
        filter_dims->w != 3 || params->stride_h != 1 || params->stride_w != 1 || (o_n & 3) != 0 ||
        wo + 3 > C1_XS || ho + 2 > C1_XROWS) {
        return 0;
    }
    for (b = 0; b < input_dims->n; ++b) {
        memset(img, 0, sizeof img);
        for (y = 0; y < ho + 2; ++y) { /* padded row y holds image row y - pad_top */
            const int32_t iy = y - params->pad_top;
            if (iy < 0 || iy >= hi_) {
                continue;
            }
            for (x = 0; x < wo + 2; ++x) {
                const int32_t ix = x - params->pad_left;
                if (ix >= 0 && ix < wi) {
                    img[y * C1_XS + x] = (int16_t)(input[(b * hi_ + iy) * wi + ix] - zx);
                }
            }
        }
        for (y = 0; y < ho; ++y) {
            const int8_t *er = e + (b * ho + y) * wo * o_n;
            for (o = 0; o < o_n; o += 4) {
                /* per pixel pair: the error words of 4 channels; the bias sums in 16-bit lanes (one
                   row: |sum| <= 127 * wo < 2^15) and the OR of the raw bytes on the way */
                int32_t s02 = 0, s13 = 0;
                uint32_t any = 0;
                for (q = 0; q < np; ++q) { /* pair words (e[2q, o + c], e[2q + 1, o + c]) of 4 channels */
                    const int32_t va = mt_read_s8x4(er + 2 * q * o_n + o);
                    const int32_t vb = 2 * q + 1 < wo ? mt_read_s8x4(er + (2 * q + 1) * o_n + o) : 0;
                    const int32_t lo = mt_pkhbt(va, vb), hi = c1_pk_hi(va, vb);
                    ep[q] = mt_sxtb16(lo);
                    ep[C1_XS / 2 + q] = mt_sxtb16_ror8(lo);
                    ep[C1_XS + q] = mt_sxtb16(hi);
                    ep[3 * (C1_XS / 2) + q] = mt_sxtb16_ror8(hi);
                    s02 = mt_sxtab16(mt_sxtab16(s02, va), vb);
                    s13 = mt_sxtab16_ror8(mt_sxtab16_ror8(s13, va), vb);
                    any |= (uint32_t)va | (uint32_t)vb;
                }
                grad_bias[o] += (int16_t)(s02 & 0xFFFF);
                grad_bias[o + 1] += (int16_t)(s13 & 0xFFFF);
                grad_bias[o + 2] += (int16_t)((uint32_t)s02 >> 16);
                grad_bias[o + 3] += (int16_t)((uint32_t)s13 >> 16);
                for (c = 0; c < 4; ++c) {
                    if ((any >> (8 * c)) & 0xFFu) { /* a channel's row of zero errors adds nothing */
                        mt_c1_bwdw_row(ep + c * (C1_XS / 2), img + y * C1_XS, np, grad + (o + c) * 9);
                    }
                }
            }
        }
    }
    return 1;
}

#endif /* MT_DSP */
