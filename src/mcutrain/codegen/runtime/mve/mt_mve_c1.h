/*
 * mcutrain runtime: the one-input-channel conv on Helium (MVE) cores (not part of the API), shared
 * by inference's conv (mve/mt_conv2d_fwd_s8.c) and FQT's forward with ranges (mve/mt_conv_c1.c).
 *
 * A one-channel conv has a reduction of kh * kw <= 16 values, one 16-byte vector: per output row
 * the kh input rows it reads are copied once, padded with z_x, into a small buffer whose window
 * of every output pixel is one gather (VLDRB with the kh * kw byte offsets of the taps), so no
 * im2col column is built; four output channels keep their zero-padded weight rows in registers
 * and take one VMLADAV.S8 each per pixel (the input zero point folded into the bias by
 * mt_mve_prepare). Lanes past kh * kw gather the window's first byte against a zero weight.
 * Shapes whose taps reach beyond a byte offset (kh > 1 rows wider than about 255 / (kh - 1)
 * bytes) do not fit (mt_mve_c1_offsets returns 0) and take the im2col GEMM instead.
 */
#ifndef MT_MVE_C1_H
#define MT_MVE_C1_H

#include "mt_mve.h"
#include "mt_types.h"

#if MT_MVE

#define MT_MVE_C1_BUF 272 /* bytes of the kh padded rows: offsets up to 255, plus one 16-lane reach */

/* Output pixels whose four accumulators one pass keeps (on the stack: 16 bytes each). */
#define MT_MVE_C1_RUN 32

/* The byte offsets of the taps in the padded rows (`*wp` bytes each, written) when the conv is
   one-channel, ungrouped and fits the gather; 1 then, else 0. */
MT_INLINE int mt_mve_c1_offsets(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *f_d,
                                const mt_dims *out_d, int32_t *wp, uint8x16_t *offs)
{
    const int32_t kh = f_d->h, kw = f_d->w, k = kh * kw;
    uint8_t off[16];
    int32_t t;
    *wp = (out_d->w - 1) * p->stride_w + kw;
    if (p->groups != 1 || in_d->c != 1 || f_d->c != 1 || k < 1 || k > 16 || f_d->n < 1 || out_d->w < 1 ||
        (kh - 1) * *wp + kw - 1 > 255 || kh * *wp + 16 > MT_MVE_C1_BUF) {
        return 0;
    }
    for (t = 0; t < 16; ++t) { /* tap t = (i, j) at i * wp + j; lanes past k read the first byte */
        off[t] = (uint8_t)(t < k ? (t / kw) * *wp + t % kw : 0);
    }
    *offs = vldrbq_u8(off);
    return 1;
}

/* The kh padded rows (z_x outside the image) of output row y into buf, `wp` bytes each. */
static void mt_mve_c1_rows(const mt_conv_params *p, const mt_dims *in_d, const int8_t *img, int32_t kh, int32_t y,
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

/*
 * The accumulators of n <= MT_MVE_C1_RUN pixels of four channels into acc (four per pixel): one
 * gather and four VMLADAV per pixel, the four weight rows in registers. NOTE: the dot products and
 * the requantization are two passes so that each loop's vectors fit the eight Q registers (one
 * loop spilled its constants to the stack at every pixel).
 */
static MT_NOINLINE void mt_mve_c1_dots(const int32_t *bias4, const int8x16_t *wv, const int8_t *buf,
                                       uint8x16_t offs, int32_t sw, int32_t n, int32_t *acc)
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

/* The zero-padded weight rows of channels o .. o + rows (rows <= 4) of k taps; a missing row
   repeats the first. */
MT_INLINE void mt_mve_c1_weights(const int8_t *filter, int32_t k, int32_t o, int32_t rows, int8x16_t *wv)
{
    const mve_pred16_t taps = vctp8q((uint32_t)k);
    int32_t r;
    for (r = 0; r < 4; ++r) {
        wv[r] = vldrbq_z_s8(filter + (o + (r < rows ? r : 0)) * k, taps);
    }
}

#endif /* MT_MVE */

#endif /* MT_MVE_C1_H */
