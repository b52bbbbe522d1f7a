/*
 * mcutrain runtime, FQT precision uint8 beyond a chain of dense convs: residual adds, global average
 * pools, a tensor read by several ops (its errors summed) and grouped/depthwise convs. Included
 * through mt_fqt.h. Python twins: fqt.FQT._fwd_add / _forward and fqt_backward.FQTBackward
 * (_combine, _bwd_node, _bwd_parametric, _weight_grad) of precision uint8.
 *
 * Conventions as in mt_fqt_u8.h: NHWC activations, OHWI filters; uint8 errors are stored with the
 * zero point of their error range; kernels overwrite their outputs unless they say "accumulate".
 */
#ifndef MT_FQT_U8_GRAPH_H
#define MT_FQT_U8_GRAPH_H

#include <stdint.h>

#include "mt_fqt_common.h"

#ifdef __cplusplus
extern "C" {
#endif /* defined(__cplusplus) */

/*
 * uint8 residual add: ca = float32(a - z_a), cb = float32(b - z_b),
 * y = clamp(floor(ca * m_a + cb * m_b) + float32(z_y), act_min, act_max) (m = s_in / s_y, float32);
 * the extremes of the reals ca * s_a + cb * s_b merged into *lo / *hi. In place allowed.
 */
mt_status mt_add_fwd_u8_range(int32_t size,
                              const uint8_t *a,
                              int32_t a_zero_point,
                              float s_a,
                              float m_a,
                              const uint8_t *b,
                              int32_t b_zero_point,
                              float s_b,
                              float m_b,
                              int32_t out_zero_point,
                              int32_t act_min,
                              int32_t act_max,
                              uint8_t *output,
                              float *lo,
                              float *hi);

/* uint8 global average pool [N, H, W, C] -> [N, C]: round_half_away(sum / (H * W)) per channel. */
mt_status mt_global_avgpool_fwd_u8(const mt_dims *input_dims, const uint8_t *input, uint8_t *output);

/*
 * Its backward on uint8 errors: every position of channel c gets
 * z_e + round_half_away((e_y[c] - z_e) / (H * W)) (the input's error shares the output's range).
 */
mt_status mt_global_avgpool_bwd_u8(const mt_dims *input_dims, int32_t e_zero_point, const uint8_t *e_y,
                                   uint8_t *e_x);

/*
 * The error of a tensor read by several ops: per element the parts' reals summed in float32 in
 * arrival order (part k: float32(e_k - zero_points[k]) * scales[k] for a uint8 error, scales[k] > 0,
 * or float32 reals, scales[k] == 0), then e_out = clamp(floor(total / out_scale) + z_out, 0, 255).
 * *lo / *hi get the extremes of the totals; e_out NULL: the extremes only.
 */
mt_status mt_fqt_error_sum_u8(int32_t size,
                              int32_t n_parts,
                              const void *const *parts,
                              const float *scales,
                              const int32_t *zero_points,
                              float out_scale,
                              int32_t out_zero_point,
                              uint8_t *e_out,
                              float *lo,
                              float *hi);

/*
 * Transposed grouped/depthwise (or dense) conv of uint8 errors with uint8 weights: acc = sum over taps
 * and the group's output channels of (e - z_e)(w - z_w), exact in int32; extremes merged into
 * *acc_min / *acc_max; then e_x = clamp(floor(float32(acc) * multiplier) + z_x, 0, 255), or
 * e_real = float32(acc) * s_acc (one part of a tensor with several consumers), or neither.
 */
mt_status mt_grouped_conv2d_bwd_in_u8(const mt_conv_params *params,
                                      int32_t e_zero_point,
                                      int32_t w_zero_point,
                                      const mt_dims *output_dims,
                                      const uint8_t *e,
                                      const mt_dims *filter_dims,
                                      const uint8_t *filter,
                                      const mt_dims *input_dims,
                                      float multiplier,
                                      int32_t out_zero_point,
                                      uint8_t *e_x,
                                      float s_acc,
                                      float *e_real,
                                      int32_t *acc_min,
                                      int32_t *acc_max);

/*
 * Per-sample uint8 weight gradient of a grouped/depthwise conv (one sample): each element
 * g = sum over positions of (e - z_e)(x - z_x), exact in int32, extremes merged into *g_min / *g_max;
 * q = clamp(floor(float32(g) * multiplier) + z_g, 0, 255) stored into grad (batch 1), or q - z_g
 * accumulated into grad16 (a batch); with either, sum (e - z_e) accumulates into grad_bias.
 * Both NULL: the extremes only.
 */
mt_status mt_grouped_conv2d_bwd_w_u8(const mt_conv_params *params,
                                     int32_t e_zero_point,
                                     const mt_dims *input_dims,
                                     const uint8_t *input,
                                     const mt_dims *output_dims,
                                     const uint8_t *e,
                                     const mt_dims *filter_dims,
                                     float multiplier,
                                     int32_t grad_zero_point,
                                     uint8_t *grad,
                                     int16_t *grad16,
                                     int32_t *grad_bias,
                                     int32_t *g_min,
                                     int32_t *g_max);

#ifdef __cplusplus
}
#endif /* defined(__cplusplus) */

#endif /* MT_FQT_U8_GRAPH_H */
