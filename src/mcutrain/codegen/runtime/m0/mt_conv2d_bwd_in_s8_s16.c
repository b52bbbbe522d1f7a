/*
 * mcutrain runtime: mt_conv2d_bwd_in_s8_s16 and _keep (see mt_fqt_s8.h, mt_fqt_keep.h), the
 * ARMv6-M (Cortex-M0+) twins of train/fqt/mt_conv2d_bwd_in_s8_s16.c, bit-exact with them.
 *
 * Why: the reference sums a block of input channels in a stack array, a load, a multiply, an add
 * and a store per MAC, and requantizes through a 64-bit multiply (__muldi3 on ARMv6-M). Here the
 * valid taps of an input position are listed once, then four input channels at a time keep their
 * sums in registers over every (tap, error column) (mt_m0_col4_run: per non-zero error one LDRSH
 * and, per channel, LDRSB + MULS + ADD); the errors requantize through mt_m0_requantize_single.
 * Channel counts not a multiple of 4, kernels over MT_M0_TAPS taps, the listed-channel form and
 * the kept-channel form (partial updates: each error's filter through keep) take the reference loop.
 * NOTE: |acc| <= 32512 * 127 * (taps * O) < 2^31 as in the reference (checked by the exporter);
 * the bound holds for partial sums in any order.
 */
#include <stddef.h>

#include "mt_conv2d_bwd_in_s8_s16_ref.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_m0.h"

#define MT_M0_TAPS 25 /* the largest kernel (kh * kw) this path lists on the stack: 5x5 */

/* The four channel sums of one input position, widened into the range and requantized to e_x. */
static void put4(const int32_t *acc,
                 int32_t multiplier,
                 int32_t shift,
                 int8_t *e_x,
                 int32_t *acc_min,
                 int32_t *acc_max)
{
    int32_t k;
    for (k = 0; k < 4; k++) {
        const int32_t v = acc[k];
        *acc_min = v < *acc_min ? v : *acc_min;
        *acc_max = v > *acc_max ? v : *acc_max;
        if (e_x) {
            e_x[k] = mt_m0_requantize_single(v, multiplier, shift, 0, -127, 127);
        }
    }
}

/* The output index t / s of offset t along an axis of `outs` outputs, or -1 where none covers it
   (the reference's test; stride 1 without the division, which ARMv6-M does in a library call). */
MT_INLINE int32_t out_index(int32_t t, int32_t s, int32_t outs)
{
    if (t < 0) {
        return -1;
    }
    if (s != 1) {
        if (t % s != 0) {
            return -1;
        }
        t /= s;
    }
    return t < outs ? t : -1;
}

/* An mt_bwd_in_fast_fn: the register-blocked loop (see the file comment); 0 where it does not apply. */
static int bwd_in_m0(const mt_conv_params *params,
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
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t sh = params->stride_h, sw = params->stride_w;
    const int32_t fstride = kh * kw * c_n; /* weight bytes from one output channel to the next */
    int32_t eoff[MT_M0_TAPS], woff[MT_M0_TAPS];
    mt_m0_col4 col;
    int32_t b, y, x;
    if (keep || n_keep < 1 || (c_n & 3) != 0 || kh * kw > MT_M0_TAPS) {
        return 0;
    }
    col.neg_bytes = -2 * n_keep;
    col.wstride = fstride;
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < h; ++y) {
            for (x = 0; x < w; ++x) {
                int32_t nt = 0, i, j, c0;
                for (i = 0; i < kh; ++i) { /* the output positions whose window covers (y, x) */
                    const int32_t oy = out_index(y + params->pad_top - i, sh, ho);
                    if (oy < 0) {
                        continue;
                    }
                    for (j = 0; j < kw; ++j) {
                        const int32_t ox = out_index(x + params->pad_left - j, sw, wo);
                        if (ox < 0) {
                            continue;
                        }
                        eoff[nt] = ((b * ho + oy) * wo + ox) * o_n;
                        woff[nt] = (i * kw + j) * c_n;
                        nt++;
                    }
                }
                for (c0 = 0; c0 < c_n; c0 += 4) {
                    int32_t u;
                    col.acc[0] = col.acc[1] = col.acc[2] = col.acc[3] = 0;
                    for (u = 0; u < nt; ++u) {
                        col.e_end = e16 + eoff[u] + n_keep;
                        col.w = filter + woff[u] + c0;
                        mt_m0_col4_run(&col);
                    }
                    put4(col.acc, multiplier, shift, e_x ? e_x + ((b * h + y) * w + x) * c_n + c0 : NULL, acc_min,
                         acc_max);
                }
            }
        }
    }
    return 1;
}

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
                                        input_dims, multiplier, shift, e_x, acc_min, acc_max, bwd_in_m0);
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
                                             multiplier, shift, e_x, acc_min, acc_max, bwd_in_m0);
}
