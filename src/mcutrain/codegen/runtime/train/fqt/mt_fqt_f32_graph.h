/*
 * mcutrain runtime, FQT float32 errors (precisions mixed and float32) beyond a chain of dense convs:
 * residual adds, global average pools, a tensor read by several ops (its errors summed) and
 * grouped/depthwise convs, every float32 sum in the sequential order of
 * FQTConfig(exact_float_order=True) (docs/integer-semantics.md 13.8). Included through mt_fqt.h.
 *
 * Conventions as in mt_fqt_f32.h: NHWC activations, OHWI filters; kernels overwrite their outputs
 * unless they say "accumulate".
 */
#ifndef MT_FQT_F32_GRAPH_H
#define MT_FQT_F32_GRAPH_H

#include <stdint.h>

#include "mt_fqt_common.h"

#ifdef __cplusplus
extern "C" {
#endif /* defined(__cplusplus) */

/*
 * float32 grouped/depthwise conv forward (precision float32): per output, the taps (i, j) in order,
 * each tap's group channels in order, summed from +0.0 (padding skipped), then act(acc + b).
 */
mt_status mt_grouped_conv2d_fwd_f32(const mt_conv_params *params,
                                    int32_t act,
                                    const mt_dims *input_dims,
                                    const float *input,
                                    const mt_dims *filter_dims,
                                    const float *filter,
                                    const float *bias,
                                    const mt_dims *output_dims,
                                    float *output);

/* float32 residual add (precision float32): y = act(a + b) (act 0 none, 1 relu, 2 relu6). */
mt_status mt_add_fwd_f32(int32_t size, int32_t act, const float *a, const float *b, float *output);

/* float32 global average pool: per channel the sum over positions from +0.0, divided by H * W. */
mt_status mt_global_avgpool_fwd_f32(const mt_dims *input_dims, const float *input, float *output);

/* (Its backward, e_y[c] / float32(H * W) at every position, is BP-QAS's mt_global_avgpool_bwd_f32 of mt_train.h.) */

/*
 * The float32 error of a tensor read by several ops: per element parts[0] + parts[1] + ... in
 * arrival order. e_out may share storage with parts[0].
 */
mt_status mt_fqt_error_sum_f32(int32_t size, int32_t n_parts, const float *const *parts, float *e_out);

/*
 * Transposed grouped/depthwise conv of float32 errors with float32 weights. Depthwise (one input
 * channel per group): per input element and channel multiplier o, the taps' products summed from
 * +0.0 in (i, j) order, then those sums over o from +0.0 in order; other groups: per tap the sum
 * over the group's output channels from +0.0, the taps summed from +0.0 in (i, j) order.
 */
mt_status mt_grouped_conv2d_bwd_in_f32(const mt_conv_params *params,
                                       const mt_dims *output_dims,
                                       const float *e,
                                       const mt_dims *filter_dims,
                                       const float *filter,
                                       const mt_dims *input_dims,
                                       float *e_x);

/* As mt_grouped_conv2d_bwd_in_f32 on uint8 weights float32(w - z_w), then one product by w_scale (mixed). */
mt_status mt_grouped_conv2d_bwd_in_u8_f32(const mt_conv_params *params,
                                          int32_t w_zero_point,
                                          float w_scale,
                                          const mt_dims *output_dims,
                                          const float *e,
                                          const mt_dims *filter_dims,
                                          const uint8_t *filter,
                                          const mt_dims *input_dims,
                                          float *e_x);

/*
 * Weight and bias gradients of one sample of a grouped/depthwise conv, accumulated: per weight the
 * sum over output positions row-major from +0.0 of e[o] * x (padding skipped) added to grad;
 * grad_bias[o] += the sum of e[o] over the positions in order.
 */
mt_status mt_grouped_conv2d_bwd_w_f32(const mt_conv_params *params,
                                      const mt_dims *input_dims,
                                      const float *input,
                                      const mt_dims *output_dims,
                                      const float *e,
                                      const mt_dims *filter_dims,
                                      float *grad,
                                      float *grad_bias);

/* As mt_grouped_conv2d_bwd_w_f32 on a uint8 input float32(x - z_x) (mixed; z_x in params). */
mt_status mt_grouped_conv2d_bwd_w_u8_f32(const mt_conv_params *params,
                                         const mt_dims *input_dims,
                                         const uint8_t *input,
                                         const mt_dims *output_dims,
                                         const float *e,
                                         const mt_dims *filter_dims,
                                         float *grad,
                                         float *grad_bias);

#ifdef __cplusplus
}
#endif /* defined(__cplusplus) */

#endif /* MT_FQT_F32_GRAPH_H */
