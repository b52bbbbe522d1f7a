/*
 * mcutrain runtime: the one-channel-input path of the FQT conv forward (see mt_conv_c1.h for why;
 * the weight gradient's is mt_conv_c1_bwd_w.c). DSP builds only; exact integer arithmetic, so it
 * gives the general kernels' results.
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

#endif /* MT_DSP */
