/*
 * mcutrain runtime: the DSP body of the depthwise conv forward (internal, not part of the API),
 * shared by dsp/mt_depthwise_conv2d_fwd_s8.c (inference) and dsp/mt_depthwise_conv2d_fwd_s8_range.c
 * (FQT, which also records each channel's accumulator extremes).
 *
 * Why this order: a depthwise output sums only kh * kw products of one channel, so the reference
 * loop (channels inner, one byte and one multiply per MAC, the weight and the requantization
 * constants reloaded per output) spends ~20 instructions per MAC. Here four channels go together
 * through every output position: their weights are unpacked once per quad into int16 words
 * (w[c], w[c + 2]) and (w[c + 1], w[c + 3]) per tap, their requantization constants prepared
 * once (mt_requant_fast_ok), and each tap is one word load of four input channels, two SXTAB16
 * (x - z_x of channels c, c + 2 and c + 1, c + 3) and four single MACs (SMLABB / SMLATT). A
 * pair of taps in one SMLAD would need the taps' bytes repacked first, which costs what it saves.
 * Windows inside the image columns run whole kernel rows (3 and 5 wide unrolled); a border window
 * runs the rectangle [i_lo, i_hi) x [j_lo, j_hi) of its valid taps (padding taps add nothing in
 * the reference either). The form of the requantization is chosen per layer (mt_dw_mode): the
 * prepared 3-instruction form for an output zero point of -128 (every fused relu), the
 * 5-instruction one otherwise, the general mt_requantize for a shift outside their range.
 * Channels past the last quad (C mod 4) take the plain loop.
 * NOTE: |acc| <= |b| + 255 * sum|w| < 2^31 (checked at export) for partial sums in any order,
 * so the sums equal the reference's; SMLABB / SMLATT wrap like int32 and never need to.
 */
#ifndef MT_DEPTHWISE_DSP_H
#define MT_DEPTHWISE_DSP_H

#include <stdint.h>

#include "mt_arch.h"
#include "mt_fixedpoint.h"
#include "mt_types.h"

#if MT_DSP

#define MT_DW_TAPS_MAX 49 /* kh * kw of the DSP body (7x7): 392 bytes of unpacked weights on the stack */

enum { MT_DW_REQ_ANY = 0, MT_DW_REQ_FAST = 1, MT_DW_REQ_FLOOR = 2 };

/*
 * The taps any output position reaches: rows [r[0], r[1]) and columns [r[2], r[3]) of the kernel
 * (on a map smaller than the kernel most taps only ever see padding). The forward and the error
 * propagation of the same layer link the same taps.
 */
MT_INLINE void mt_dw_used_taps(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *f_d,
                               const mt_dims *out_d, int32_t *r)
{
    const int32_t top = p->pad_top - (out_d->h - 1) * p->stride_h, left = p->pad_left - (out_d->w - 1) * p->stride_w;
    r[0] = top > 0 ? top : 0;
    r[1] = in_d->h + p->pad_top < f_d->h ? in_d->h + p->pad_top : f_d->h;
    r[2] = left > 0 ? left : 0;
    r[3] = in_d->w + p->pad_left < f_d->w ? in_d->w + p->pad_left : f_d->w;
}

/* Four channels' MACs of one tap: x at px (four channels), unpacked weights at pw. */
#define MT_DW_TAP(px, pw)                                                                                        \
    do {                                                                                                         \
        const int32_t v_ = mt_read_s8x4(px);                                                                     \
        const int32_t x02_ = mt_sxtab16(zz, v_);      /* (x[c0] - z_x, x[c0 + 2] - z_x) */                       \
        const int32_t x13_ = mt_sxtab16_ror8(zz, v_); /* channels c0 + 1, c0 + 3 */                              \
        a0 = mt_smlabb(x02_, (pw)[0], a0);                                                                       \
        a2 = mt_smlatt(x02_, (pw)[0], a2);                                                                       \
        a1 = mt_smlabb(x13_, (pw)[1], a1);                                                                       \
        a3 = mt_smlatt(x13_, (pw)[1], a3);                                                                       \
    } while (0)

/* Channels [c0, c0 + 4) over every output position in requantization form `mode` (MT_DW_REQ_*);
   `range` (a constant per call site) also merges the accumulator extremes into acc_min / acc_max. */
MT_INLINE void mt_dw_quad(const mt_conv_params *p,
                          const mt_per_channel_quant *q,
                          const mt_dims *in_d,
                          const int8_t *input,
                          const mt_dims *f_d,
                          const int8_t *filter,
                          const int32_t *bias,
                          const mt_dims *out_d,
                          int8_t *output,
                          int32_t *acc_min,
                          int32_t *acc_max,
                          int32_t c0,
                          int mode,
                          const int range)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c;
    const int32_t kh = f_d->h, kw = f_d->w, kk = kh * kw;
    const int32_t zz = (int32_t)(((uint32_t)(-p->input_zero_point) & 0xFFFFu) | ((uint32_t)(-p->input_zero_point) << 16));
    int32_t wq[2 * MT_DW_TAPS_MAX];
    const int32_t act_lo = p->act_min, act_hi = p->act_max, zy = p->output_zero_point;
    const int clamp = mode != MT_DW_REQ_ANY && (act_lo != -128 || act_hi != 127);
    const int32_t sw = p->stride_w, rs = w * c_n; /* rs: the bytes of one image row */
    /* the outputs [ox_a, ox_b) whose windows lie inside the image columns */
    const int32_t ox_a = (p->pad_left + sw - 1) / sw;
    const int32_t ox_b = w - kw + p->pad_left >= 0 ? (w - kw + p->pad_left) / sw + 1 : 0;
    int32_t rm[4], rsh[4], rc1[4], lo[4], hi[4], b[4];
    int32_t t, k, n, oy, ox;
    int32_t r[4];
    mt_dw_used_taps(p, in_d, f_d, out_d, r);
    for (t = 0; t < kk; ++t) {
        const int8_t *f = filter + c0 * kk + t;
        if (t / kw < r[0] || t / kw >= r[1] || t % kw < r[2] || t % kw >= r[3]) {
            continue; /* a tap no output reaches (small maps, large kernels): never read */
        }
        wq[2 * t] = (int32_t)(((uint32_t)(int32_t)f[0] & 0xFFFFu) | ((uint32_t)(int32_t)f[2 * kk] << 16));
        wq[2 * t + 1] = (int32_t)(((uint32_t)(int32_t)f[kk] & 0xFFFFu) | ((uint32_t)(int32_t)f[3 * kk] << 16));
    }
    for (k = 0; k < 4; ++k) {
        rm[k] = mt_requant_mult(q->multiplier[c0 + k]);
        rsh[k] = mt_requant_sh(q->shift[c0 + k]);
        rc1[k] = mode == MT_DW_REQ_ANY ? 0 : mt_requant_c1(rsh[k], p->output_zero_point);
        b[k] = bias[c0 + k];
        if (range) {
            lo[k] = acc_min[c0 + k];
            hi[k] = acc_max[c0 + k];
        }
    }
    for (n = 0; n < in_d->n; ++n) {
        for (oy = 0; oy < out_d->h; ++oy) {
            const int32_t iy0 = oy * p->stride_h - p->pad_top;
            const int32_t i_lo = iy0 < 0 ? -iy0 : 0;
            const int32_t i_hi = h - iy0 < kh ? h - iy0 : kh;
            /* row i_lo of the windows at image column 0, and the weights of that kernel row */
            const int8_t *xrow = input + ((n * h + iy0 + i_lo) * w) * c_n + c0;
            const int32_t *wrow = wq + 2 * i_lo * kw;
            int8_t *y = output + (n * out_d->h + oy) * out_d->w * c_n + c0;
            for (ox = 0; ox < out_d->w; ++ox, y += c_n) {
                const int32_t ix0 = ox * sw - p->pad_left;
                int32_t a0 = b[0], a1 = b[1], a2 = b[2], a3 = b[3];
                int32_t i, j;
                if (ox >= ox_a && ox < ox_b && (kw == 3 || kw == 5)) {
                    /* an interior window: whole rows, no column bounds (3 and 5 wide unrolled) */
                    const int8_t *px = xrow + ix0 * c_n;
                    const int32_t *pw = wrow;
                    for (i = i_hi - i_lo; i > 0; --i, px += rs, pw += 2 * kw) {
                        MT_DW_TAP(px, pw);
                        MT_DW_TAP(px + c_n, pw + 2);
                        MT_DW_TAP(px + 2 * c_n, pw + 4);
                        if (kw == 5) {
                            MT_DW_TAP(px + 3 * c_n, pw + 6);
                            MT_DW_TAP(px + 4 * c_n, pw + 8);
                        }
                    }
                } else {
                    const int32_t j_lo = ix0 < 0 ? -ix0 : 0;
                    const int32_t j_hi = w - ix0 < kw ? w - ix0 : kw;
                    for (i = i_lo; i < i_hi; ++i) {
                        const int8_t *px = xrow + (i - i_lo) * rs + (ix0 + j_lo) * c_n;
                        const int32_t *pw = wq + 2 * (i * kw + j_lo);
                        for (j = j_lo; j < j_hi; ++j, px += c_n, pw += 2) {
                            MT_DW_TAP(px, pw);
                        }
                    }
                }
                if (range) {
                    lo[0] = a0 < lo[0] ? a0 : lo[0];
                    hi[0] = a0 > hi[0] ? a0 : hi[0];
                    lo[1] = a1 < lo[1] ? a1 : lo[1];
                    hi[1] = a1 > hi[1] ? a1 : hi[1];
                    lo[2] = a2 < lo[2] ? a2 : lo[2];
                    hi[2] = a2 > hi[2] ? a2 : hi[2];
                    lo[3] = a3 < lo[3] ? a3 : lo[3];
                    hi[3] = a3 > hi[3] ? a3 : hi[3];
                }
                if (mode == MT_DW_REQ_FLOOR) {
                    a0 = mt_requantize_floor(a0, rm[0], rsh[0], rc1[0]);
                    a1 = mt_requantize_floor(a1, rm[1], rsh[1], rc1[1]);
                    a2 = mt_requantize_floor(a2, rm[2], rsh[2], rc1[2]);
                    a3 = mt_requantize_floor(a3, rm[3], rsh[3], rc1[3]);
                } else if (mode == MT_DW_REQ_FAST) {
                    a0 = mt_requantize_fast(a0, rm[0], rsh[0], rc1[0]);
                    a1 = mt_requantize_fast(a1, rm[1], rsh[1], rc1[1]);
                    a2 = mt_requantize_fast(a2, rm[2], rsh[2], rc1[2]);
                    a3 = mt_requantize_fast(a3, rm[3], rsh[3], rc1[3]);
                } else {
                    a0 = mt_requantize(a0, q->multiplier[c0], q->shift[c0], zy, act_lo, act_hi);
                    a1 = mt_requantize(a1, q->multiplier[c0 + 1], q->shift[c0 + 1], zy, act_lo, act_hi);
                    a2 = mt_requantize(a2, q->multiplier[c0 + 2], q->shift[c0 + 2], zy, act_lo, act_hi);
                    a3 = mt_requantize(a3, q->multiplier[c0 + 3], q->shift[c0 + 3], zy, act_lo, act_hi);
                }
                if (clamp) { /* the prepared forms clamp to [-128, 127]; the layer's clamp lies inside it */
                    a0 = a0 < act_lo ? act_lo : (a0 > act_hi ? act_hi : a0);
                    a1 = a1 < act_lo ? act_lo : (a1 > act_hi ? act_hi : a1);
                    a2 = a2 < act_lo ? act_lo : (a2 > act_hi ? act_hi : a2);
                    a3 = a3 < act_lo ? act_lo : (a3 > act_hi ? act_hi : a3);
                }
                y[0] = (int8_t)a0;
                y[1] = (int8_t)a1;
                y[2] = (int8_t)a2;
                y[3] = (int8_t)a3;
            }
        }
    }
    if (range) {
        for (k = 0; k < 4; ++k) {
            acc_min[c0 + k] = lo[k];
            acc_max[c0 + k] = hi[k];
        }
    }
}

/* One channel c (past the last quad) over every output position: the reference arithmetic. */
MT_INLINE void mt_dw_single(const mt_conv_params *p,
                            const mt_per_channel_quant *q,
                            const mt_dims *in_d,
                            const int8_t *input,
                            const mt_dims *f_d,
                            const int8_t *filter,
                            const int32_t *bias,
                            const mt_dims *out_d,
                            int8_t *output,
                            int32_t *acc_min,
                            int32_t *acc_max,
                            int32_t c)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c;
    const int32_t kh = f_d->h, kw = f_d->w, zx = p->input_zero_point;
    int32_t n, oy, ox;
    for (n = 0; n < in_d->n; ++n) {
        for (oy = 0; oy < out_d->h; ++oy) {
            const int32_t iy0 = oy * p->stride_h - p->pad_top;
            const int32_t i_lo = iy0 < 0 ? -iy0 : 0;
            const int32_t i_hi = h - iy0 < kh ? h - iy0 : kh;
            for (ox = 0; ox < out_d->w; ++ox) {
                const int32_t ix0 = ox * p->stride_w - p->pad_left;
                const int32_t j_lo = ix0 < 0 ? -ix0 : 0;
                const int32_t j_hi = w - ix0 < kw ? w - ix0 : kw;
                int32_t acc = bias[c];
                int32_t i, j;
                for (i = i_lo; i < i_hi; ++i) {
                    const int8_t *px = input + ((n * h + iy0 + i) * w + ix0) * c_n + c;
                    for (j = j_lo; j < j_hi; ++j) {
                        acc += ((int32_t)px[j * c_n] - zx) * filter[(c * kh + i) * kw + j];
                    }
                }
                if (acc_min) {
                    acc_min[c] = acc < acc_min[c] ? acc : acc_min[c];
                    acc_max[c] = acc > acc_max[c] ? acc : acc_max[c];
                }
                output[((n * out_d->h + oy) * out_d->w + ox) * c_n + c] =
                    mt_requantize(acc, q->multiplier[c], q->shift[c], p->output_zero_point, p->act_min, p->act_max);
            }
        }
    }
}

/*
 * The requantization form of a depthwise layer the quad loop takes (MT_DW_REQ_*), or -1 for a layer
 * it does not take (a channel multiplier, or more than MT_DW_TAPS_MAX taps), which then runs the
 * reference loop. The caller runs mt_dw_quad (out of line, so that one call's stack holds one set
 * of unpacked weights) on every quad, then mt_dw_single on the rest.
 */
MT_INLINE int mt_dw_mode(const mt_conv_params *p, const mt_per_channel_quant *q, const mt_dims *in_d,
                         const mt_dims *f_d)
{
    int mode = p->output_zero_point == -128 ? MT_DW_REQ_FLOOR : MT_DW_REQ_FAST;
    int32_t c;
    if (f_d->n != in_d->c || f_d->h * f_d->w > MT_DW_TAPS_MAX) {
        return -1;
    }
    for (c = 0; c < in_d->c; ++c) {
        if (!mt_requant_fast_ok(q->multiplier[c], q->shift[c])) {
            mode = MT_DW_REQ_ANY;
        }
    }
    return mode;
}

#undef MT_DW_TAP
#endif /* MT_DSP */

#endif /* MT_DEPTHWISE_DSP_H */
