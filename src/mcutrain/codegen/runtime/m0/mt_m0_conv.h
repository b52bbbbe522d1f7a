/*
 * mcutrain runtime: the dense (groups == 1) conv loop of the ARMv6-M twins (not part of the API),
 * shared by the inference conv (m0/mt_conv2d_fwd_s8.c) and the FQT conv with dynamic ranges
 * (m0/mt_conv2d_fwd_s8_range.c), so both compute one pixel the same way.
 *
 * Why two loop orders: with groups == 1 the valid taps of one kernel row are one contiguous run
 * of (kx1 - kx0) * C bytes in both the input and each weight row, so a pixel is at most kh runs
 * of mt_m0_dot4_run (four output channels per input byte), padding skipped by clipping the run as
 * the reference skips it. When the runs are short (a window of at most MT_M0_PATCH bytes over
 * more than one row: the first layer's one input channel) the per-run set-up would outweigh the
 * MACs, so the window is first copied into one contiguous patch on the stack, padding filled
 * with z_x (which adds (z_x - z_x) * w = 0, as the reference's skip), and each group of four
 * channels is one run over the whole window.
 */
#ifndef MT_M0_CONV_H
#define MT_M0_CONV_H

#include <stddef.h>

#include "mt_m0.h"
#include "mt_types.h"

/* The largest window (kh * kw * C bytes) copied into a patch; larger ones run row by row. */
#define MT_M0_PATCH 64

/* The first index k in [0, size) with 0 <= origin + k, and the end of those with origin + k < limit. */
MT_INLINE void mt_m0_clip_window(int32_t origin, int32_t size, int32_t limit, int32_t *k0, int32_t *k1)
{
    *k0 = origin < 0 ? -origin : 0;
    *k1 = limit - origin < size ? limit - origin : size;
}

/*
 * The kh x wrow window whose row 0 starts at `x` (input rows xrow bytes apart) as one contiguous
 * patch: rows [ky0, ky1) hold their valid run of `len` bytes at byte `from`, everything else z_x.
 */
static MT_M0_UNUSED void mt_m0_fill_patch(int8_t *patch,
                                          const int8_t *x,
                                          int32_t kh,
                                          int32_t wrow,
                                          int32_t xrow,
                                          int32_t ky0,
                                          int32_t ky1,
                                          int32_t from,
                                          int32_t len,
                                          int32_t zx)
{
    int32_t ky, i;
    for (ky = 0; ky < kh; ky++) {
        int8_t *dst = patch + ky * wrow;
        if (ky < ky0 || ky >= ky1 || len <= 0) {
            for (i = 0; i < wrow; i++) {
                dst[i] = (int8_t)zx;
            }
            continue;
        }
        for (i = 0; i < from; i++) {
            dst[i] = (int8_t)zx;
        }
        for (i = 0; i < len; i++) {
            dst[from + i] = x[ky * xrow + from + i];
        }
        for (i = from + len; i < wrow; i++) {
            dst[i] = (int8_t)zx;
        }
    }
}

/* What every pixel of one conv call shares, read through one pointer by the pixel loop. */
typedef struct {
    const int8_t *filter;
    const int32_t *bias;
    const int32_t *multiplier;
    const int32_t *shift;
    int32_t outs;       /* output channels O */
    int32_t wch;        /* weight bytes of one output channel: kh * kw * C */
    int32_t wrow;       /* weight bytes of one kernel row: kw * C */
    int32_t xrow;       /* input bytes of one image row: W * C */
    int32_t zx;         /* input zero point */
    mt_m0_out out;      /* output zero point and clamp */
} mt_m0_conv_plan;

/* acc_min[k] / acc_max[k] widened to acc[k] for k < count (FQT's per-channel accumulator extremes). */
MT_INLINE void mt_m0_widen_ranges(const int32_t *acc, int32_t count, int32_t *acc_min, int32_t *acc_max)
{
    int32_t k;
    for (k = 0; k < count; k++) {
        const int32_t v = acc[k];
        acc_min[k] = v < acc_min[k] ? v : acc_min[k];
        acc_max[k] = v > acc_max[k] ? v : acc_max[k];
    }
}

/*
 * The O outputs of one pixel: `rows` runs of `len` bytes from `x` (rows xrow apart) against the
 * weights from byte `woff` of every channel (rows wrow apart), four channels per mt_m0_dot4_run;
 * acc_min/acc_max [O] (in/out) widened to every accumulator, NULL for none (inference).
 * NOTE: the ranges are arguments, not plan fields, so the inference conv's constant NULL reaches
 * this static function (GCC's constant propagation) and its test folds away.
 */
static MT_M0_UNUSED void mt_m0_conv_pixel(const mt_m0_conv_plan *c,
                                          const int8_t *x,
                                          int32_t woff,
                                          int32_t rows,
                                          int32_t len,
                                          int8_t *y,
                                          int32_t *acc_min,
                                          int32_t *acc_max)
{
    const int32_t outs = c->outs;
    mt_m0_dot d;
    int32_t o;
    d.neg_len = -len;
    d.neg_zx = -c->zx;
    d.wrow = c->wrow;
    d.xrow = c->xrow;
    for (o = 0; o < outs; o += 4) {
        d.x_end = x + len;
        d.rows = rows;
        mt_m0_dot4_channels(&d, c->filter + o * c->wch + woff, c->wch, o, outs, c->bias);
        if (rows > 0) {
            mt_m0_dot4_run(&d);
        }
        /* NOTE: the channel count is computed after the dot product, not kept live across it */
        if (acc_min) {
            mt_m0_widen_ranges(d.acc, outs - o < 4 ? outs - o : 4, acc_min + o, acc_max + o);
        }
        mt_m0_requantize_run(d.acc, c->multiplier + o, c->shift + o, outs - o < 4 ? outs - o : 4, &c->out, y + o);
    }
}

/* The dense (groups == 1) conv, pixel by pixel; acc_min/acc_max as in mt_m0_conv_pixel (NULL: none). */
static MT_M0_UNUSED void mt_m0_conv_dense(const mt_conv_params *p,
                                          const mt_per_channel_quant *q,
                                          const mt_dims *in_d,
                                          const int8_t *input,
                                          const mt_dims *f_d,
                                          const int8_t *filter,
                                          const int32_t *bias,
                                          const mt_dims *out_d,
                                          int8_t *output,
                                          int32_t *acc_min,
                                          int32_t *acc_max)
{
    const int32_t ch = in_d->c;
    mt_m0_conv_plan c;
    int8_t patch[MT_M0_PATCH];
    int use_patch;
    int8_t *y = output;
    int32_t n, oy, ox;
    c.filter = filter;
    c.bias = bias;
    c.multiplier = q->multiplier;
    c.shift = q->shift;
    c.outs = f_d->n;
    c.wrow = f_d->w * ch;
    c.wch = f_d->h * c.wrow;
    c.xrow = in_d->w * ch;
    c.zx = p->input_zero_point;
    c.out.zero_point = p->output_zero_point;
    c.out.act_min = p->act_min;
    c.out.act_max = p->act_max;
    use_patch = f_d->h > 1 && c.wch <= MT_M0_PATCH;
    for (n = 0; n < in_d->n; n++) {
        for (oy = 0; oy < out_d->h; oy++) {
            const int32_t iy0 = oy * p->stride_h - p->pad_top;
            const int8_t *row = input + (n * in_d->h + iy0) * c.xrow;
            int32_t ky0, ky1;
            mt_m0_clip_window(iy0, f_d->h, in_d->h, &ky0, &ky1);
            for (ox = 0; ox < out_d->w; ox++) {
                const int32_t ix0 = ox * p->stride_w - p->pad_left;
                int32_t kx0, kx1, len;
                mt_m0_clip_window(ix0, f_d->w, in_d->w, &kx0, &kx1);
                len = (kx1 - kx0) * ch;
                if (use_patch) {
                    mt_m0_fill_patch(patch, row + ix0 * ch, f_d->h, c.wrow, c.xrow, ky0, ky1, kx0 * ch, len, c.zx);
                    mt_m0_conv_pixel(&c, patch, 0, 1, c.wch, y, acc_min, acc_max);
                } else {
                    mt_m0_conv_pixel(&c, row + ky0 * c.xrow + (ix0 + kx0) * ch, ky0 * c.wrow + kx0 * ch,
                                     len > 0 ? ky1 - ky0 : 0, len, y, acc_min, acc_max);
                }
                y += c.outs;
            }
        }
    }
}

#endif /* MT_M0_CONV_H */
