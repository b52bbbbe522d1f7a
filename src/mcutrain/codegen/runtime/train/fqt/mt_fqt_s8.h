/*
 * mcutrain runtime, FQT precision int8: forward with ranges, backward (int8 errors, int16
 * prescaled), update, graph ops (depthwise, grouped, add, pools) and the dynamic partial updates.
 * Included through mt_fqt.h.
 *
 * Conventions as in mt_nn.h / mt_train.h: NHWC activations, OHWI filters, (O, I) linear weights;
 * kernels overwrite their outputs unless they say "accumulate"; no allocation; MT_OK or MT_ERR_ARG.
 */
#ifndef MT_FQT_S8_H
#define MT_FQT_S8_H

#include <stdint.h>

#include "mt_fqt_common.h"

#ifdef __cplusplus
extern "C" {
#endif /* defined(__cplusplus) */

/*
 * Conv forward that also reports per-channel accumulator extremes (FQT tracks output ranges on
 * the fly, without a float copy). Same arithmetic as mt_conv2d_fwd_s8 (plain C loops).
 *   ctx               in: scratch; with 2 * K bytes (K = kh * kw * C) and groups 1 an int16
 *                     im2col column per output position (faster), else {NULL, 0}
 *   acc_min, acc_max  in/out: [O] running extremes of bias + sum of products (merged, so a batch
 *                     loop keeps them; initialise to INT32_MAX / INT32_MIN)
 */
mt_status mt_conv2d_fwd_s8_range(const mt_context *ctx,
                                 const mt_conv_params *params,
                                 const mt_per_channel_quant *quant,
                                 const mt_dims *input_dims,
                                 const int8_t *input,
                                 const mt_dims *filter_dims,
                                 const int8_t *filter,
                                 const int32_t *bias,
                                 const mt_dims *output_dims,
                                 int8_t *output,
                                 int32_t *acc_min,
                                 int32_t *acc_max);

/* Linear forward with accumulator extremes, as mt_conv2d_fwd_s8_range. */
mt_status mt_linear_fwd_s8_range(const mt_linear_params *params,
                                 const mt_per_channel_quant *quant,
                                 int32_t batch,
                                 const int8_t *input,
                                 int32_t in_features,
                                 const int8_t *weight,
                                 const int32_t *bias,
                                 int32_t out_features,
                                 int8_t *output,
                                 int32_t *acc_min,
                                 int32_t *acc_max);

/* Max pooling that also keeps, per output, the tap index (i * kw + j) of its first maximum. */
mt_status mt_maxpool_fwd_s8_argmax(const mt_pool_params *params,
                                   const mt_dims *input_dims,
                                   const int8_t *input,
                                   const mt_dims *output_dims,
                                   int8_t *output,
                                   uint8_t *argmax);

/*
 * Max-pool backward for windows that tile the input (stride == kernel): each window's error goes
 * to its argmax, every other input error is 0. e_x is overwritten.
 */
mt_status mt_maxpool_bwd_s8(const mt_pool_params *params,
                            const mt_dims *input_dims,
                            const mt_dims *output_dims,
                            const uint8_t *argmax,
                            const int8_t *e_y,
                            int8_t *e_x);

/* ReLU mask of int8 errors: e_out = e_in where lo < y (and y < hi if hi <= 127), else 0; in place allowed. */
mt_status mt_relu_bwd_s8(int32_t size, int32_t lo, int32_t hi, const int8_t *y, const int8_t *e_in,
                         int8_t *e_out);

/*
 * The logits' int8 error from the Q24 error p - onehot: its range (float32(min) * 2^-24, likewise
 * max) goes into *r, which `seed` != 0 initializes from it if it has no range yet (batch 1; a batch
 * seeds after seeing all its samples). With r initialized and e the exponent of its scale,
 * e_out = clamp(rounding_shift_right(err, 24 + e), -127, 127) (a left shift when 24 + e < 1);
 * without a range yet e_out is left untouched.
 */
mt_status mt_fqt_logit_error_s8(int32_t size, const int32_t *err, int32_t seed, mt_fqt_range *r, int8_t *e_out);

/*
 * int8 errors times Q15 ratios s_w[o] / max(s_w) into int16 (fqt._prescale_errors):
 * r[o] = round_half_away(float32(s_w[o] / s_max) * 2^15), e16 = round_half_away(e * r[o] / 2^7).
 *   rows in: positions (batch * H * W); channels in: O;  e in: [rows, O];  e16 out: [rows, O]
 *   s_max out: max(s_w)
 */
mt_status mt_fqt_prescale_s16(int32_t rows, int32_t channels, const int8_t *e, const float *s_w, int16_t *e16,
                              float *s_max);

/*
 * Transposed conv of prescaled errors: acc[n, h, w, c] = sum over taps (i, j) and output channels
 * o of e16[n, oh, ow, o] * w[o, i, j, c]; int32 (the exporter checks the bound). The extremes of
 * acc go to *acc_min / *acc_max (merged); with e_x non-NULL, also
 * e_x = clamp(requantize(acc, multiplier, shift), -127, 127). Dense convs (groups 1) only.
 * channels: NULL (every output channel) or the n_channels output channels to sum over (partial
 * updates: the others' errors are 0, so skipping them is exact and is the saving).
 */
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
                                  int32_t *acc_max);

/* Linear error propagation acc[b, i] = sum_o e16[b, o] * w[o, i], as mt_conv2d_bwd_in_s8_s16. */
mt_status mt_linear_bwd_in_s8_s16(int32_t batch,
                                  const int32_t *channels,
                                  int32_t n_channels,
                                  int32_t out_features,
                                  const int16_t *e16,
                                  const int8_t *weight,
                                  int32_t in_features,
                                  int32_t multiplier,
                                  int32_t shift,
                                  int8_t *e_x,
                                  int32_t *acc_min,
                                  int32_t *acc_max);

/*
 * Weight and bias gradients of a dense conv from the stored input and int8 errors, accumulated
 * into int32 buffers: g[o, i, j, c] += sum over positions of e[o] * (x - z_x) (padding is real 0),
 * gb[o] += sum of e[o]. Zero the buffers before the first sample of a step.
 */
mt_status mt_conv2d_bwd_w_s8_s8(const mt_conv_params *params,
                                const mt_dims *input_dims,
                                const int8_t *input,
                                const mt_dims *output_dims,
                                const int8_t *e,
                                const mt_dims *filter_dims,
                                int32_t *grad,
                                int32_t *grad_bias);

/* Linear gradients, accumulated: g[o, i] += sum_b e[b, o] * (x[b, i] - z_x), gb[o] += sum_b e[b, o]. */
mt_status mt_linear_bwd_w_s8_s8(int32_t input_zero_point,
                                int32_t batch,
                                const int8_t *input,
                                int32_t in_features,
                                const int8_t *e,
                                int32_t out_features,
                                int32_t *grad,
                                int32_t *grad_bias);

/*
 * The in-place update of one layer (fqt._standardize + fqt._update_layer, int8 weights):
 * per channel o with upd[o] (upd NULL: all), the real gradient row (K weights, then the bias) is
 * standardized with EMA-smoothed mean / standard deviation, the weights dequantized, stepped by
 * lr * g_hat, their channel range moved (alpha_w) and requantized with the new scale by
 * stochastic rounding floor(v + u), u from *state (one draw per weight, rows in order).
 *   channels, per_channel in: O, K;  grad in/consumed: [O, K] int32 (overwritten with float32
 *   intermediates of the updated rows);  grad_bias in: [O] int32
 *   norm_mu, norm_sd in/out: [O] float32;  norm_init in/out: [O] int8 (0 / 1)
 *   w in/out: [O, K] int8;  s_w in/out: [O];  w_lo, w_hi in/out: [O] EMA of the channel range
 *   bias_step out: [O] lr * g_hat of the bias (0 where not updated), for mt_fqt_bias_rescale_s32
 */
mt_status mt_fqt_upd_s8(const mt_fqt_upd_params *p,
                        int32_t channels,
                        int32_t per_channel,
                        int32_t *grad,
                        const int32_t *grad_bias,
                        const uint8_t *upd,
                        float *norm_mu,
                        float *norm_sd,
                        int8_t *norm_init,
                        int8_t *w,
                        float *s_w,
                        float *w_lo,
                        float *w_hi,
                        float *bias_step,
                        uint32_t *state);

/*
 * The same update in fixed point (docs/integer-semantics.md 13.9: integer sums, int32 per weight,
 * float32 only per channel), for cores without an FPU; the same parameters and state. grad is
 * overwritten with int32 intermediates of the updated rows; at most 65534 weights per channel
 * (MT_ERR_ARG above).
 */
mt_status mt_fqt_upd_s8_int(const mt_fqt_upd_params *p,
                            int32_t channels,
                            int32_t per_channel,
                            int32_t *grad,
                            const int32_t *grad_bias,
                            const uint8_t *upd,
                            float *norm_mu,
                            float *norm_sd,
                            int8_t *norm_init,
                            int8_t *w,
                            float *s_w,
                            float *w_lo,
                            float *w_hi,
                            float *bias_step,
                            uint32_t *state);

/*
 * Move an int32 bias to the new accumulator scale float32(s_x) * s_w[c] and apply its step
 * (fqt._rescale_bias): b = clamp(round_half_away((float32(b) * old[c] - step[c]) / new[c]), +-room)
 * for channels whose scale changed or that were updated; room = max(2^31 - 1 - 255 * sum|w[c]|, 0).
 *   acc_scale in/out: [O] the bias scales (old in, new out);  bias_step in: [O] or NULL
 */
mt_status mt_fqt_bias_rescale_s32(int32_t channels,
                                  int32_t per_channel,
                                  const int8_t *w,
                                  float s_x,
                                  const float *s_w,
                                  const float *bias_step,
                                  const uint8_t *upd,
                                  float *acc_scale,
                                  int32_t *bias);

/* ------------------------------------------------------------------ graph ops (int8) */

/*
 * Depthwise conv forward (groups = C = O) with per-channel accumulator extremes: the arithmetic and
 * the arguments of mt_conv2d_fwd_s8_range (ctx unused), channels as the inner loop.
 */
mt_status mt_depthwise_conv2d_fwd_s8_range(const mt_context *ctx,
                                           const mt_conv_params *params,
                                           const mt_per_channel_quant *quant,
                                           const mt_dims *input_dims,
                                           const int8_t *input,
                                           const mt_dims *filter_dims,
                                           const int8_t *filter,
                                           const int32_t *bias,
                                           const mt_dims *output_dims,
                                           int8_t *output,
                                           int32_t *acc_min,
                                           int32_t *acc_max);

/*
 * Transposed grouped conv (depthwise and dense included) of prescaled errors:
 * acc[n, h, w, c] = sum over taps (i, j) and the output channels o of c's group of
 * e16[n, oh, ow, o] * w[o, i, j, c mod cig]; exact (int64 past 520 products per sum).
 * With e_x: e_x = clamp(requantize(acc, multiplier, shift), -127, 127) and the extremes of acc
 * merged into *acc_min / *acc_max (MT_ERR_ARG if acc leaves int32, as the Python twin refuses);
 * with e_real (a tensor read by several ops): e_real = float32(acc) * s_acc; with neither: the
 * extremes only. At most one of e_x, e_real.
 *   e16 in: [N, Ho, Wo, O];  filter in: [O, kh, kw, C / groups];  e_x out: [N, H, W, C]
 */
mt_status mt_grouped_conv2d_bwd_in_s8_s16(const mt_conv_params *params,
                                          const mt_dims *output_dims,
                                          const int16_t *e16,
                                          const mt_dims *filter_dims,
                                          const int8_t *filter,
                                          const mt_dims *input_dims,
                                          int32_t multiplier,
                                          int32_t shift,
                                          int8_t *e_x,
                                          float s_acc,
                                          float *e_real,
                                          int32_t *acc_min,
                                          int32_t *acc_max);

/*
 * Weight and bias gradients of a grouped conv (depthwise included), accumulated into int32
 * buffers: g[o, i, j, c] += sum over positions of e[o] * (x[g * cig + c] - z_x), gb[o] += sum e[o].
 */
mt_status mt_grouped_conv2d_bwd_w_s8_s8(const mt_conv_params *params,
                                        const mt_dims *input_dims,
                                        const int8_t *input,
                                        const mt_dims *output_dims,
                                        const int8_t *e,
                                        const mt_dims *filter_dims,
                                        int32_t *grad,
                                        int32_t *grad_bias);

/* Residual-add multipliers (a_multiplier, b_multiplier, right_shift of *p) from the current scales. */
mt_status mt_fqt_add_multipliers(float s_a, float s_b, float s_y, mt_add_params *p);

/*
 * Residual add (as mt_add_fwd_s8) that also merges the extremes of the real sums
 * float32(a - z_a) * s_a + float32(b - z_b) * s_b into *lo / *hi (initialise to +-huge).
 * In place allowed (output == a or b).
 */
mt_status mt_add_fwd_s8_range(const mt_add_params *params,
                              int32_t size,
                              const int8_t *a,
                              const int8_t *b,
                              float s_a,
                              float s_b,
                              int8_t *output,
                              float *lo,
                              float *hi);

/*
 * TFLite's ADD multipliers and shifts (a_/b_/output_multiplier and _shift of *p; mode "tflite") from
 * the current scales, as quant.fixedpoint.tflite_add_params; MT_ERR_ARG when TFLite's ADD cannot
 * requantize them (output multiplier >= 1).
 */
mt_status mt_fqt_add_tflite_params(float s_a, float s_b, float s_y, mt_add_tflite_params *p);

/*
 * TFLite's int8 ADD (mt_add_fwd_s8_tflite) that also merges the extremes of the real sums
 * float32(a - z_a) * s_a + float32(b - z_b) * s_b into *lo / *hi (initialise to +-huge).
 * In place allowed (output == a or b).
 */
mt_status mt_add_fwd_s8_tflite_range(const mt_add_tflite_params *params,
                                     int32_t size,
                                     const int8_t *a,
                                     const int8_t *b,
                                     float s_a,
                                     float s_b,
                                     int8_t *output,
                                     float *lo,
                                     float *hi);

/* Average-pool backward, windows not overlapping: each input of a window gets round(e_y / count). */
mt_status mt_avgpool_bwd_s8(const mt_pool_params *params,
                            const mt_dims *input_dims,
                            const mt_dims *output_dims,
                            const int8_t *e_y,
                            int8_t *e_x);

/* Global average-pool backward: every position of channel c gets round(e_y[c] / (H * W)). */
mt_status mt_global_avgpool_bwd_s8(const mt_dims *input_dims, const int8_t *e_y, int8_t *e_x);

/*
 * The error of a tensor read by several ops: the parts' reals summed in float32 in arrival order
 * (part k: float32(int8) * scales[k], or float32 reals where scales[k] == 0), extremes of the
 * totals to *lo / *hi; with e_out, e_out = clamp(round_half_away(total / out_scale), -127, 127).
 *   parts in: n_parts pointers to [size] int8 or float32;  e_out out: [size] (may be parts[k])
 */
mt_status mt_fqt_error_sum_s8(int32_t size,
                              int32_t n_parts,
                              const void *const *parts,
                              const float *scales,
                              float out_scale,
                              int8_t *e_out,
                              float *lo,
                              float *hi);

/* ------------------------------------------------------------------ dynamic partial updates */

/*
 * k of seed A's partial updates (methods.partial.PartialPolicy.keep_counts), float32 in order:
 * r = |float32(loss)| / float32(max(loss_max, 1)), lam = min(lambda_min + r * (lambda_max -
 * lambda_min), 1), k = clamp(floor(lam * n), 1, n).
 */
int32_t mt_fqt_keep_count(int32_t loss, int32_t loss_max, float lambda_min, float lambda_max, int32_t n);

/*
 * Keep the k channels of e [rows, channels] (one sample) with the largest sum of |e|, ties to the
 * lower index; zero the other channels' errors in place. mask out: [channels] 0 / 1; list out:
 * [channels], the first *kept entries the kept channels in increasing order (also the scratch of
 * the magnitudes).
 */
mt_status mt_fqt_topk_s8(int32_t rows, int32_t channels, int32_t k, int8_t *e, int32_t *list, uint8_t *mask,
                         int32_t *kept);

#ifdef __cplusplus
}
#endif /* defined(__cplusplus) */

#endif /* MT_FQT_S8_H */
