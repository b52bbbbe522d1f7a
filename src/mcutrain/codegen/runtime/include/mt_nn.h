/*
 * mcutrain runtime: the int8 inference kernels (public API).
 *
 * Every kernel implements one op of docs/integer-semantics.md and is bit-identical to its
 * Python twin in mcutrain.engines.int_engine (mt_conv2d_fwd_s8 <-> conv2d_fwd_s8, ...).
 * Names follow mt_<op>_<pass>_<dtype>; kernels that need scratch memory have a
 * <kernel>_get_buffer_size companion, and the caller passes at least that many bytes in `ctx`
 * (the code generator places the scratch in the static arena). Kernels overwrite their output;
 * they never accumulate into it and never allocate.
 *
 * Common parameter conventions:
 *   ctx       in:  caller-owned scratch, 4-byte aligned, >= <kernel>_get_buffer_size() bytes
 *   *_dims    in:  shapes, all entries >= 1 (batch n included; the kernels loop over it)
 *   input     in:  int8 activations, NHWC (or (N, I) for linear), values in [-128, 127]
 *   output    out: int8 activations, NHWC (or (N, O)); must not overlap the inputs unless
 *                  the kernel says so (elementwise kernels may run in place)
 * Return codes: MT_OK, MT_ERR_ARG (NULL pointer or inconsistent shapes), MT_ERR_BUFFER
 * (scratch smaller than the companion function says).
 */
#ifndef MT_NN_H
#define MT_NN_H

#include <stdint.h>

#include "mt_types.h"

#ifdef __cplusplus
extern "C" {
#endif /* defined(__cplusplus) */

/*
 * 2-d convolution, plain or grouped:
 *   y[n,oy,ox,o] = requant(bias[o] + sum_{ky,kx,i} (x[n, oy*sh - pt + ky, ox*sw - pl + kx,
 *                  g*Cg + i] - z_x) * w[o,ky,kx,i]),  g = o / (O / groups), Cg = C / groups,
 * where positions outside the input are padding holding z_x (they contribute 0).
 *   params        in: zero points, strides, top/left padding, groups, output clamp
 *   quant         in: per-output-channel multiplier/shift, [O] each
 *   input_dims    in: (N, H, W, C);  input [N, H, W, C] int8
 *   filter_dims   in: (O, kh, kw, C / groups);  filter [O, kh, kw, C / groups] int8, in [-127, 127]
 *   bias          in: [O] int32, scale s_x * s_w[o]
 *   output_dims   in: (N, Ho, Wo, O);  output [N, Ho, Wo, O] int8 (out)
 * Bound: the exporter proves |bias[o]| + max|x - z_x| * sum|w[o]| < 2^31 for every channel, so
 * the int32 accumulator never overflows whatever the summation order.
 * Scratch: the DSP path needs 2 im2col columns of int16 (see the companion); with less scratch
 * it falls back to the reference loop (same results).
 */
mt_status mt_conv2d_fwd_s8(const mt_context *ctx,
                           const mt_conv_params *params,
                           const mt_per_channel_quant *quant,
                           const mt_dims *input_dims,
                           const int8_t *input,
                           const mt_dims *filter_dims,
                           const int8_t *filter,
                           const int32_t *bias,
                           const mt_dims *output_dims,
                           int8_t *output);

/* Scratch bytes mt_conv2d_fwd_s8 uses for `filter_dims` with MT_DSP (0 without): 14 * K for
   K = kh * kw * Cg <= 256, else 4 * K; plus 2 * K when Cg is not a multiple of 4. */
int32_t mt_conv2d_fwd_s8_get_buffer_size(const mt_dims *filter_dims);

/*
 * 2-d convolution with the weights stored widened to int16 (frozen weights exported for DSP
 * builds; same results as mt_conv2d_fwd_s8 with the int8 weights they came from).
 *   filter_dims   in: (O, kh, kw, C / groups), the logical shape
 *   filter        in: [O, kh, R] int16, 4-byte aligned, R = kw * Cg rounded up to a multiple of 4:
 *                 each kernel row's kw * Cg weights (kx-major, as mt_conv2d_fwd_s8's), zeros up
 *                 to R, every group of four stored as (w0, w2, w1, w3) (SMLAD order); within
 *                 each group of O / groups rows, rows 2i and 2i + 1 interleaved two values at a
 *                 time (an odd last row stays alone)
 * Other parameters, bound and return codes as mt_conv2d_fwd_s8.
 * Scratch: the DSP paths need a window of padded input rows, three int16 columns of kh * R and
 * 16 bytes per output channel (see the companion); with less scratch or an unaligned filter it
 * falls back to the reference loop (same results).
 */
mt_status mt_conv2d_fwd_s8_s16(const mt_context *ctx,
                               const mt_conv_params *params,
                               const mt_per_channel_quant *quant,
                               const mt_dims *input_dims,
                               const int8_t *input,
                               const mt_dims *filter_dims,
                               const int16_t *filter,
                               const int32_t *bias,
                               const mt_dims *output_dims,
                               int8_t *output);

/* Scratch bytes mt_conv2d_fwd_s8_s16 uses for these shapes with MT_DSP (0 without):
   S * B + 6 * kh * R + 16 * O + (3 * O rounded up to 4), S = min(kh + sh (kh + 2 sh when
   Wo == 1), (Ho - 1) * sh + kh), B = the bytes of a padded input row (((Wo - 1) * sw + kw) * C
   + 3 rounded up to 4);
   for a reduction of at most ten values (groups 1, O a multiple of 4) the larger of that and
   36 * O + 320 + 2 * kh * B. */
int32_t mt_conv2d_fwd_s8_s16_get_buffer_size(const mt_conv_params *params,
                                             const mt_dims *input_dims,
                                             const mt_dims *filter_dims,
                                             const mt_dims *output_dims);

/*
 * Depthwise 2-d convolution (groups == C, channel multiplier m = O / C >= 1):
 *   y[n,oy,ox,o] = requant(bias[o] + sum_{ky,kx} (x[n, oy*sh - pt + ky, ox*sw - pl + kx, o / m]
 *                  - z_x) * w[o,ky,kx,0]).
 * Parameters as mt_conv2d_fwd_s8 (params->groups must equal C); filter_dims (O, kh, kw, 1).
 * Needs no scratch.
 */
mt_status mt_depthwise_conv2d_fwd_s8(const mt_conv_params *params,
                                     const mt_per_channel_quant *quant,
                                     const mt_dims *input_dims,
                                     const int8_t *input,
                                     const mt_dims *filter_dims,
                                     const int8_t *filter,
                                     const int32_t *bias,
                                     const mt_dims *output_dims,
                                     int8_t *output);

/*
 * Fully connected layer: y[n,o] = requant(bias[o] + sum_i (x[n,i] - z_x) * w[o,i]).
 *   params        in: zero points and output clamp
 *   quant         in: per-output multiplier/shift, [O] each
 *   batch         in: N >= 1
 *   input         in: [N, I] int8
 *   in_features   in: I >= 1
 *   weight        in: [O, I] int8, row-major, in [-127, 127]
 *   bias          in: [O] int32
 *   out_features  in: O >= 1
 *   output        out: [N, O] int8
 * Bound as for mt_conv2d_fwd_s8. Scratch: the DSP path keeps the centred input row as int16.
 */
mt_status mt_linear_fwd_s8(const mt_context *ctx,
                           const mt_linear_params *params,
                           const mt_per_channel_quant *quant,
                           int32_t batch,
                           const int8_t *input,
                           int32_t in_features,
                           const int8_t *weight,
                           const int32_t *bias,
                           int32_t out_features,
                           int8_t *output);

/* Scratch bytes mt_linear_fwd_s8 uses: 2 * in_features with MT_DSP, else 0. */
int32_t mt_linear_fwd_s8_get_buffer_size(int32_t in_features);

/*
 * Fully connected layer with the weights stored four rows interleaved (frozen weights exported
 * for DSP builds; same results as mt_linear_fwd_s8 with the plain weights they came from).
 *   weight        in: int8, 4-byte aligned, each row padded with zeros to I4 = I rounded up to a
 *                 multiple of 4; rows 4b .. 4b + 3 (b < O / 4) interleaved four values at a time:
 *                 weight (o, i) at (o & ~3) * I4 + (i / 4) * 16 + (o % 4) * 4 + i % 4; the last
 *                 O % 4 rows stored alone (row o at o * I4)
 * Other parameters, bound and return codes as mt_linear_fwd_s8. Scratch: 2 * I4 bytes for the
 * DSP path; with less, or unaligned weights, the reference loop runs (same results).
 */
mt_status mt_linear_fwd_s8_rows4(const mt_context *ctx,
                                 const mt_linear_params *params,
                                 const mt_per_channel_quant *quant,
                                 int32_t batch,
                                 const int8_t *input,
                                 int32_t in_features,
                                 const int8_t *weight,
                                 const int32_t *bias,
                                 int32_t out_features,
                                 int8_t *output);

/* Scratch bytes mt_linear_fwd_s8_rows4 uses: 2 * I4 with MT_DSP, else 0. */
int32_t mt_linear_fwd_s8_rows4_get_buffer_size(int32_t in_features);

/*
 * Max pooling over kernel_h x kernel_w windows (no padding); same qparams in and out.
 *   input_dims (N, H, W, C), output_dims (N, Ho, Wo, C) with Ho = (H - kh) / sh + 1, likewise Wo.
 */
mt_status mt_maxpool_fwd_s8(const mt_pool_params *params,
                            const mt_dims *input_dims,
                            const int8_t *input,
                            const mt_dims *output_dims,
                            int8_t *output);

/*
 * Average pooling: y = round_half_away(sum of the window / (kh * kw)), sum in int32 (|sum| <=
 * kh * kw * 128); same qparams in and out, so no requantization and no clamp are needed.
 * Shapes as mt_maxpool_fwd_s8.
 */
mt_status mt_avgpool_fwd_s8(const mt_pool_params *params,
                            const mt_dims *input_dims,
                            const int8_t *input,
                            const mt_dims *output_dims,
                            int8_t *output);

/*
 * Global average pooling: (N, H, W, C) -> (N, 1, 1, C), y = round_half_away(sum / (H * W)),
 * sum in int32 (H * W * 128 < 2^31 for any H * W < 2^24). Same qparams in and out.
 */
mt_status mt_global_avgpool_fwd_s8(const mt_dims *input_dims, const int8_t *input, int8_t *output);

/*
 * TFLite's int8 MEAN over H and W (mode "tflite"; int_engine.global_avgpool_fwd_s8_tflite):
 * (N, H, W, C) -> (N, 1, 1, C), y = clamp(R(sum(x) - z * H * W, M', s') + z, -128, 127), R =
 * TFLite's MultiplyByQuantizedMultiplier; |sum(x - z)| <= 255 * H * W < 2^31 for H * W <= 2^23.
 *   params  in: z, M', s' (mt_mean_params);  input  in: int8 NHWC;  output  out: int8 [N, C].
 */
mt_status mt_global_avgpool_fwd_s8_tflite(const mt_mean_params *params,
                                          const mt_dims *input_dims,
                                          const int8_t *input,
                                          int8_t *output);

/*
 * Elementwise add with rescaling of both inputs to the output scale:
 *   y = clamp(z_y + round_half_away(((a - z_a) * Ma + (b - z_b) * Mb) / 2^n), act_min, act_max)
 * with int64 intermediates (|a - z_a| <= 255, Ma, Mb < 2^31: the sum is below 2^40).
 *   size  in: number of elements (>= 1);  a, b  in: [size] int8;  output  out: [size] int8.
 * May run in place (output == a or output == b).
 */
mt_status mt_add_fwd_s8(const mt_add_params *params,
                        int32_t size,
                        const int8_t *a,
                        const int8_t *b,
                        int8_t *output);

/*
 * TFLite's int8 ADD (mode "tflite"; int_engine.add_fwd_s8_tflite): each centred input times 2^20
 * requantized to the shared scale, the sum requantized to the output (see mt_add_tflite_params).
 * |a - z_a| 2^20 < 2^28, each scaled input below 2^27, their sum below 2^28: int32 throughout.
 *   size  in: number of elements (>= 1);  a, b  in: [size] int8;  output  out: [size] int8.
 * May run in place (output == a or output == b).
 */
mt_status mt_add_fwd_s8_tflite(const mt_add_tflite_params *params,
                               int32_t size,
                               const int8_t *a,
                               const int8_t *b,
                               int8_t *output);

/*
 * Standalone relu / relu6: y = clamp(x, act_min, act_max) with the input's qparams
 * (relu: act_min = z; relu6: act_max = z + round(6 / s)). May run in place.
 */
mt_status mt_relu_fwd_s8(int32_t act_min, int32_t act_max, int32_t size, const int8_t *input, int8_t *output);

#ifdef __cplusplus
}
#endif /* defined(__cplusplus) */

#endif /* MT_NN_H */
