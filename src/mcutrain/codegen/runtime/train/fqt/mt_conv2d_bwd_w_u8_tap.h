/*
 * The sums of seed A's uint8 conv weight gradient for one filter o and one tap (i, j), shared by
 * mt_conv2d_bwd_w_u8 (its _keep form) and mt_conv2d_bwd_w_u8_s16, always inline:
 * g[c] = sum over output positions of (e[pos, o] - z_e) * (input[pos + tap, c0 + c] - z_x), exact
 * in int32 (integer sums: any order gives the same bits). The positions whose tap falls on padding
 * are cut off by the tap's valid row and column range, computed once, instead of a test per term;
 * a position whose error is z_e (masked by a ReLU or not a max pool's argmax: most of them) adds
 * 0 and is skipped before its channels are read.
 */
#ifndef MT_CONV2D_BWD_W_U8_TAP_H
#define MT_CONV2D_BWD_W_U8_TAP_H

#include <stdint.h>

#include "mt_arch.h"
#include "mt_fqt.h"

/* Channels summed at once: the accumulators of one tap live on the stack (4 * 32 bytes). */
#define MT_U8_TAP_CHANNELS 32

/* [lo, hi) of the output positions q with 0 <= q * stride - pad + tap < size (one axis). */
MT_INLINE void mt_u8_tap_range(int32_t size, int32_t out_size, int32_t stride, int32_t pad, int32_t tap,
                               int32_t *lo, int32_t *hi)
{
    const int32_t a = pad - tap; /* q * stride >= a and q * stride <= size - 1 + a */
    const int32_t top = size - 1 + a;
    *lo = a <= 0 ? 0 : (a + stride - 1) / stride;
    *hi = top < 0 ? 0 : top / stride + 1;
    *hi = *hi > out_size ? out_size : *hi;
    *lo = *lo > *hi ? *hi : *lo;
}

/* g[0..cn) (overwritten) for filter o, tap (i, j), input channels c0..c0 + cn (cn <= MT_U8_TAP_CHANNELS). */
MT_INLINE void mt_conv2d_bwd_w_u8_tap(const mt_conv_params *params,
                                      int32_t e_zero_point,
                                      const mt_dims *input_dims,
                                      const uint8_t *input,
                                      const mt_dims *output_dims,
                                      const uint8_t *e,
                                      int32_t o_n,
                                      int32_t o,
                                      int32_t i,
                                      int32_t j,
                                      int32_t c0,
                                      int32_t cn,
                                      int32_t *g)
{
    const int32_t w = input_dims->w, c_n = input_dims->c, wo = output_dims->w;
    const int32_t sh = params->stride_h, sw = params->stride_w, zx = params->input_zero_point;
    int32_t y_lo, y_hi, x_lo, x_hi, y, x, c;
    mt_u8_tap_range(input_dims->h, output_dims->h, sh, params->pad_top, i, &y_lo, &y_hi);
    mt_u8_tap_range(w, wo, sw, params->pad_left, j, &x_lo, &x_hi);
    for (c = 0; c < cn; ++c) {
        g[c] = 0;
    }
    for (y = y_lo; y < y_hi; ++y) {
        const uint8_t *pe = e + (y * wo + x_lo) * o_n + o;
        const uint8_t *px = input + ((y * sh - params->pad_top + i) * w + x_lo * sw - params->pad_left + j) * c_n + c0;
        for (x = x_lo; x < x_hi; ++x, pe += o_n, px += sw * c_n) {
            const int32_t ev = (int32_t)*pe - e_zero_point;
            if (ev == 0) {
                continue;
            }
            for (c = 0; c < cn; ++c) {
                g[c] += ev * ((int32_t)px[c] - zx);
            }
        }
    }
}

#endif /* MT_CONV2D_BWD_W_U8_TAP_H */
