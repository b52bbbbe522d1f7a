/*
 * The reference rows of seed A's uint8 linear weight gradient (mt_linear_bwd_w_u8, its _keep form
 * and the batch-summing mt_linear_bwd_w_u8_s16), always inline: each kernel file instantiates it
 * with a constant `s16`, so the per-sample and the summed gradients share one definition of the
 * product, its range and its requantization (Python twins: fqt_kernels.linear_bwd_w_acc and
 * fqt.FQT._weight_grad).
 */
#ifndef MT_LINEAR_BWD_W_U8_REF_H
#define MT_LINEAR_BWD_W_U8_REF_H

#include <stdint.h>
#include <string.h>

#include "mt_arch.h"
#include "mt_fqt_math.h"

/*
 * Rows keep[0..n) (keep NULL: 0..n) of g = (e[o] - e_zero_point) * (input[i] - input_zero_point):
 * input in [in_features] uint8, e in [out_features] uint8; extremes of g merged into *g_min /
 * *g_max; q = clamp(floor(float32(g) * multiplier) + grad_zero_point, 0, 255).
 *   s16 = 0: grad (out, may be NULL: only the range) [out_features, in_features] uint8 = q, and
 *            grad_bias[o] += e[o] - e_zero_point where grad is not NULL
 *   s16 = 1: grad (in/out) [out_features, in_features] int16 += q - grad_zero_point (batch sums),
 *            grad_bias[o] += e[o] - e_zero_point
 */
MT_INLINE void mt_linear_bwd_w_u8_ref(const int32_t *keep,
                                      int32_t n,
                                      int32_t input_zero_point,
                                      int32_t e_zero_point,
                                      const uint8_t *input,
                                      int32_t in_features,
                                      const uint8_t *e,
                                      float multiplier,
                                      int32_t grad_zero_point,
                                      void *grad,
                                      int32_t *grad_bias,
                                      int32_t *g_min,
                                      int32_t *g_max,
                                      int32_t s16)
{
    int32_t t, i, x_min = 255, x_max = 0, lo = *g_min, hi = *g_max;
    for (i = 0; i < in_features; ++i) {
        const int32_t xi = input[i];
        x_min = xi < x_min ? xi : x_min;
        x_max = xi > x_max ? xi : x_max;
    }
    for (t = 0; t < n; ++t) {
        const int32_t o = keep ? keep[t] : t;
        const int32_t eo = (int32_t)e[o] - e_zero_point;
        const int32_t idx = o * in_features;
        if (grad) {
            grad_bias[o] += eo;
        }
        if (in_features > 0) { /* NOTE: eo * (x - z_x) is monotone in x: its extremes are at x's */
            const int32_t a = eo * (x_min - input_zero_point), b = eo * (x_max - input_zero_point);
            const int32_t row_lo = a < b ? a : b, row_hi = a < b ? b : a;
            lo = row_lo < lo ? row_lo : lo;
            hi = row_hi > hi ? row_hi : hi;
        }
        if (eo == 0) { /* a masked error (ReLU, max pool): the whole row is the quantized 0 */
            const int32_t q0 = mt_requant_f32_floor(0, multiplier, grad_zero_point, 0, 255);
            if (s16) {
                int16_t *g16 = (int16_t *)grad + idx;
                for (i = 0; i < in_features; ++i) {
                    g16[i] = (int16_t)(g16[i] + q0 - grad_zero_point);
                }
            } else if (grad) {
                memset((uint8_t *)grad + idx, q0, (size_t)in_features);
            }
            continue;
        }
        if (s16) {
            int16_t *g16 = (int16_t *)grad + idx;
            for (i = 0; i < in_features; ++i) {
                const int32_t g = eo * ((int32_t)input[i] - input_zero_point);
                g16[i] = (int16_t)(g16[i] + mt_requant_f32_floor(g, multiplier, grad_zero_point, 0, 255) -
                                   grad_zero_point);
            }
        } else if (grad) {
            uint8_t *g8 = (uint8_t *)grad + idx;
            for (i = 0; i < in_features; ++i) {
                const int32_t g = eo * ((int32_t)input[i] - input_zero_point);
                g8[i] = (uint8_t)mt_requant_f32_floor(g, multiplier, grad_zero_point, 0, 255);
            }
        }
    }
    *g_min = lo;
    *g_max = hi;
}

#endif /* MT_LINEAR_BWD_W_U8_REF_H */
