/*
 * mcutrain runtime: the FQT conv forward with ranges for one-channel inputs on Helium (MVE) cores,
 * in place of the DSP path of train/fqt/mt_conv_c1.c (mt_conv_c1.h), exact integer sums like it.
 *
 * A one-channel conv has a reduction of kh * kw <= 16 values, one 16-byte vector: per output row
 * the kh input rows it reads are copied once, padded with z_x, into a small buffer whose window
 * of every output pixel is one gather (VLDRB with the kh * kw byte offsets of the taps), so no
 * im2col column is built; four output channels keep their zero-padded weight rows in registers
 * and take one VMLADAVA.S8 each per pixel (the input zero point folded into the bias by
 * mt_mve_prepare), then the four accumulators are requantized as one vector in the library's mode
 * and their extremes widened (the plain min/max of mt_conv2d_fwd_s8_range); a block with a channel
 * outside the prepared requantization takes mt_requantize per output. Lanes past kh * kw gather
 * the window's first byte against a zero weight. Shapes whose taps reach beyond a byte offset
 * (kh > 1 rows wider than about 255 / (kh - 1) bytes), or a build without MVE, return 0, and
 * mt_conv2d_fwd_s8_range takes the MVE GEMM of mt_conv_fwd_pairs (same bits).
 */
#include "mt_conv_c1.h"
#include "mt_mve.h"

#if MT_MVE

#define C1_BUF 272 /* bytes of the kh padded rows: offsets up to 255, plus one 16-lane reach */

/* The kh padded rows (z_x outside the image) of output row y into buf, `wp` bytes each. */
static void c1_rows(const mt_conv_params *p, const mt_dims *in_d, const int8_t *img, int32_t kh, int32_t y,
                    int32_t wp, int8_t *buf)
{
    const int32_t zx = p->input_zero_point;
    const int32_t x0 = p->pad_left < wp ? p->pad_left : wp;
    const int32_t x1 = p->pad_left + in_d->w < wp ? p->pad_left + in_d->w : wp;
    int32_t i, xx;
    for (i = 0; i < kh; ++i) {
        const int32_t iy = y * p->stride_h - p->pad_top + i;
        int8_t *row = buf + i * wp;
        if (iy < 0 || iy >= in_d->h) {
            for (xx = 0; xx < wp; xx += 16) {
                vstrbq_p_s8(row + xx, vdupq_n_s8((int8_t)zx), vctp8q((uint32_t)(wp - xx)));
            }
            continue;
        }
        for (xx = 0; xx < x0; ++xx) {
            row[xx] = (int8_t)zx;
        }
        for (; xx < x1; xx += 16) {
            const mve_pred16_t n = vctp8q((uint32_t)(x1 - xx));
            vstrbq_p_s8(row + xx, vldrbq_z_s8(img + iy * in_d->w + xx - p->pad_left, n), n);
        }
        for (xx = x1; xx < wp; ++xx) {
            row[xx] = (int8_t)zx;
        }
    }
}

/* Output pixels whose four accumulators one pass keeps (on the stack: 16 bytes each). */
#define C1_RUN 32

/*
 * The accumulators of n <= C1_RUN pixels of four channels into acc (four per pixel): one gather
 * and four VMLADAVA per pixel, the four weight rows in registers. NOTE: the dot products and the
 * requantization are two passes so that each loop's vectors fit the eight Q registers (one loop
 * spilled its constants to the stack at every pixel).
 */
static MT_NOINLINE void c1_dots(const int32_t *bias4, const int8x16_t *wv, const int8_t *buf, uint8x16_t offs,
                                int32_t sw, int32_t n, int32_t *acc)
{
    const int8x16_t w0 = wv[0], w1 = wv[1], w2 = wv[2], w3 = wv[3];
    const int32x4_t b4 = vldrwq_s32(bias4);
    int32_t x;
    for (x = 0; x < n; ++x, buf += sw, acc += 4) { /* the bias added once per vector (wrapping, as the sum) */
        const int8x16_t col = vldrbq_gather_offset_s8(buf, offs);
        vstrwq_s32(acc, vaddq_s32(b4, mt_mve_vec4(vmladavq_s8(w0, col), vmladavq_s8(w1, col), vmladavq_s8(w2, col),
                                                 vmladavq_s8(w3, col))));
    }
}

/* The n pixels' accumulators (four channels, `rows` <= 4 of them stored) requantized to out (pixels
   o_n bytes apart) and widened into the extremes; `floor` a constant of each copy. */
MT_INLINE void c1_requant(int floor, const mt_mve_block *b, int32_t i, int32_t rows, const int32_t *acc, int32_t n,
                          int32_t o_n, int32_t lo, int32_t hi, int8_t *out, int32_t *acc_min, int32_t *acc_max)
{
    const int32x4_t m = vldrwq_s32(b->mult + i);
    const int32x4_t nsh = vldrwq_s32(b->nsh + i);
    const int32x4_t c1 = vldrwq_s32(b->c1 + i);
    const mve_pred16_t keep = vctp32q((uint32_t)rows);
    int32x4_t mn = vdupq_n_s32(INT32_MAX), mx = vdupq_n_s32(INT32_MIN);
    int32_t x;
    if (rows == 4) { /* whole vectors: no predicate in the loop */
        for (x = 0; x < n; ++x, acc += 4, out += o_n) {
            const int32x4_t a = vldrwq_s32(acc);
            vstrbq_s32(out, mt_mve_requantize(a, m, nsh, c1, floor, lo, hi));
            mn = vminq_s32(mn, a);
            mx = vmaxq_s32(mx, a);
        }
    } else {
        for (x = 0; x < n; ++x, acc += 4, out += o_n) {
            const int32x4_t a = vldrwq_s32(acc);
            vstrbq_p_s32(out, mt_mve_requantize(a, m, nsh, c1, floor, lo, hi), keep);
            mn = vminq_s32(mn, a);
            mx = vmaxq_s32(mx, a);
        }
    }
    mt_mve_widen_range(mn, mx, rows, acc_min, acc_max);
}

/* c1_requant for a block with a channel outside the prepared range: mt_requantize per output. */
static MT_NOINLINE void c1_requant_each(const mt_per_channel_quant *q, int32_t o, int32_t rows, const int32_t *acc,
                                        int32_t n, int32_t o_n, int32_t zy, int32_t lo, int32_t hi, int8_t *out,
                                        int32_t *acc_min, int32_t *acc_max)
{
    const mve_pred16_t keep = vctp32q((uint32_t)rows);
    int32x4_t mn = vdupq_n_s32(INT32_MAX), mx = vdupq_n_s32(INT32_MIN);
    int32_t x, j;
    for (x = 0; x < n; ++x, acc += 4, out += o_n) {
        const int32x4_t a = vldrwq_z_s32(acc, keep);
        for (j = 0; j < rows; ++j) {
            out[j] = mt_requantize(acc[j], q->multiplier[o + j], q->shift[o + j], zy, lo, hi);
        }
        mn = vminq_s32(mn, a);
        mx = vmaxq_s32(mx, a);
    }
    mt_mve_widen_range(mn, mx, rows, acc_min, acc_max);
}

/* c1_requant of the floor requantization (output zero point -128) and of any other, out of line. */
static MT_NOINLINE void c1_requant_floor(const mt_mve_block *b, int32_t i, int32_t rows, const int32_t *acc,
                                         int32_t n, int32_t o_n, int32_t lo, int32_t hi, int8_t *out,
                                         int32_t *acc_min, int32_t *acc_max)
{
    c1_requant(1, b, i, rows, acc, n, o_n, lo, hi, out, acc_min, acc_max);
}

static MT_NOINLINE void c1_requant_any(const mt_mve_block *b, int32_t i, int32_t rows, const int32_t *acc,
                                       int32_t n, int32_t o_n, int32_t lo, int32_t hi, int8_t *out,
                                       int32_t *acc_min, int32_t *acc_max)
{
    c1_requant(0, b, i, rows, acc, n, o_n, lo, hi, out, acc_min, acc_max);
}

#endif /* MT_MVE */

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
#if MT_MVE
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w, k = kh * kw;
    const int32_t ho = output_dims->h, wo = output_dims->w, sw = params->stride_w;
    const int32_t wp = (wo - 1) * sw + kw; /* bytes of a padded row */
    const int32_t zy = params->output_zero_point;
    const mve_pred16_t taps = vctp8q((uint32_t)k);
    int8_t buf[C1_BUF];
    uint8_t off[16];
    uint8x16_t offs;
    int32_t acc[4 * C1_RUN];
    int32_t o0, i, t, bn, y, x;
    if (params->groups != 1 || input_dims->c != 1 || filter_dims->c != 1 || k < 1 || k > 16 || o_n < 1 ||
        wo < 1 || (kh - 1) * wp + kw - 1 > 255 || kh * wp + 16 > C1_BUF) {
        return 0;
    }
    for (t = 0; t < 16; ++t) { /* tap t = (i, j) at i * wp + j; lanes past k read the first byte */
        off[t] = (uint8_t)(t < k ? (t / kw) * wp + t % kw : 0);
    }
    offs = vldrbq_u8(off);
    for (o0 = 0; o0 < o_n; o0 += MT_MVE_BLOCK) {
        const int32_t nb = o_n - o0 < MT_MVE_BLOCK ? o_n - o0 : MT_MVE_BLOCK;
        mt_mve_block b;
        mt_mve_prepare(&b, filter, k, k, bias, quant, params->input_zero_point, zy, o0, nb);
        for (bn = 0; bn < input_dims->n; ++bn) {
            const int8_t *img = input + bn * input_dims->h * input_dims->w;
            for (y = 0; y < ho; ++y) {
                int8_t *out = output + ((bn * ho + y) * wo) * o_n + o0;
                c1_rows(params, input_dims, img, kh, y, wp, buf);
                for (i = 0; i < nb; i += 4) {
                    const int32_t rows = nb - i < 4 ? nb - i : 4;
                    int8x16_t wv[4];
                    int32_t r;
                    for (r = 0; r < 4; ++r) { /* zero-padded rows; a missing fourth repeats the first */
                        wv[r] = vldrbq_z_s8(filter + (o0 + i + (r < rows ? r : 0)) * k, taps);
                    }
                    for (x = 0; x < wo; x += C1_RUN) {
                        const int32_t n = wo - x < C1_RUN ? wo - x : C1_RUN;
                        c1_dots(b.bias + i, wv, buf + x * sw, offs, sw, n, acc);
                        if (!b.vec) {
                            c1_requant_each(quant, o0 + i, rows, acc, n, o_n, zy, params->act_min, params->act_max,
                                            out + x * o_n + i, acc_min + o0 + i, acc_max + o0 + i);
                            continue;
                        }
                        (zy == -128 ? c1_requant_floor : c1_requant_any)(&b, i, rows, acc, n, o_n, params->act_min,
                                                                         params->act_max, out + x * o_n + i,
                                                                         acc_min + o0 + i, acc_max + o0 + i);
                    }
                }
            }
        }
    }
    return 1;
#else  /* !MT_MVE */
    (void)params, (void)quant, (void)input_dims, (void)input, (void)filter_dims, (void)filter, (void)bias;
    (void)output_dims, (void)output, (void)acc_min, (void)acc_max;
    return 0;
#endif /* MT_MVE */
}
