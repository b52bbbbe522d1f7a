/*
 * mcutrain runtime: the fully quantized training (FQT) kernels of precision int8 (public API).
 *
 * The C twins of mcutrain.methods.fqt (Deutel et al., "On-Device Training of Fully Quantized Deep
 * Neural Networks on Cortex-M Microcontrollers", IEEE TCAD 44(4), 2025) in the project's int8
 * format: per-output-channel symmetric int8 weights, asymmetric per-tensor int8 activations with
 * fixed-point requantization, symmetric int8 errors with power-of-two scales, dynamic ranges
 * (exponential moving averages, EMA) recomputed on the device, gradient standardization and an
 * in-place update with stochastic rounding from the xorshift32 stream. docs/c-training-kernels.md
 * ("FQT") gives every float32 operation order; build with -ffp-contract=off, no fast-math.
 *
 * Conventions as in mt_nn.h / mt_train.h: NHWC activations, OHWI filters, (O, I) linear weights;
 * kernels overwrite their outputs unless they say "accumulate"; no allocation; MT_OK or MT_ERR_ARG.
 */
#ifndef MT_FQT_H
#define MT_FQT_H

#include <stdint.h>

#include "mt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One dynamic range: the EMA of a tensor's real [min, max] and what this step saw of it. */
typedef struct {
    float lo;          /* EMA of the minimum (valid once initialized) */
    float hi;          /* EMA of the maximum */
    float step_lo;     /* this step's minimum so far (valid when seen) */
    float step_hi;     /* this step's maximum so far */
    int32_t initialized; /* 0 until the first range arrives (errors: their first step) */
    int32_t fresh;     /* 1: initialized from this step's range, so this step does not move it */
    int32_t seen;      /* 1: step_lo / step_hi hold a range of this step */
} mt_fqt_range;

/* Record a range seen in this step (min/max merge with what the step saw before). */
void mt_fqt_range_see(mt_fqt_range *r, float lo, float hi);

/* An uninitialized range takes this step's range now (marked fresh); no-op otherwise. */
void mt_fqt_range_seed(mt_fqt_range *r);

/*
 * End of step: lo <- (1 - a) * lo + a * step_lo (same for hi), float32 in that order, unless the
 * range is fresh or saw nothing; then clears fresh / seen. alpha: float32 EMA rate in (0, 1].
 */
void mt_fqt_range_update(mt_fqt_range *r, float alpha);

/*
 * Asymmetric int8 qparams of [lo, hi] (quant.qparams.qparams_from_range): lo = min(lo, 0),
 * hi = max(hi, 0), s = (hi - lo) / 255 (1.0 if 0, at least 2^-126), z = clamp(round_half_away(
 * -128 - lo / s), -128, 127); all float32.
 */
void mt_fqt_qparams_s8(float lo, float hi, float *scale, int32_t *zero_point);

/*
 * Output clamp of a fused activation in the int8 domain (quant.fixedpoint.activation_range):
 * act 0 none, 1 relu, 2 relu6 (6 / s rounded half away in float64).
 */
void mt_fqt_act_range_s8(float scale, int32_t zero_point, int32_t act, int32_t *act_min, int32_t *act_max);

/*
 * Exponent e of the power-of-two error scale 2^e of range [lo, hi] (fqt.pow2_symmetric_qparams):
 * the smallest e >= -126 with 127 * 2^e >= max(-lo, hi); -24 for an all-zero range.
 */
int32_t mt_fqt_err_exp(float lo, float hi);

/* Record the real range float32(acc_min) * scale .. float32(acc_max) * scale (errors, per tensor). */
void mt_fqt_range_see_acc(mt_fqt_range *r, int32_t acc_min, int32_t acc_max, float scale);

/* The power-of-two error scale 2^mt_fqt_err_exp(r->lo, r->hi) of an initialized error range. */
float mt_fqt_err_scale(const mt_fqt_range *r);

/*
 * quantize_multiplier(m) of quant.fixedpoint for a float64 m >= 0: (multiplier, shift) with
 * m = multiplier * 2^(shift - 31); (0, 0) for m < 2^-32. MT_ERR_ARG for m >= 2^30 (the output
 * scale is far too small for its inputs) or a non-finite m.
 */
mt_status mt_fqt_quantize_multiplier(double m, int32_t *multiplier, int32_t *shift);

/*
 * Per-channel output multipliers of a conv / linear: M_c = (double)s_x * (double)s_w[c] / (double)s_y.
 *   channels in: O;  s_w in: [O];  multiplier, shift out: [O]
 */
mt_status mt_fqt_output_multipliers(float s_x, const float *s_w, float s_y, int32_t channels,
                                    int32_t *multiplier, int32_t *shift);

/*
 * The real range of a layer's outputs from per-channel accumulator extremes:
 * min_c(float32(acc_min[c]) * float32(s_x * s_w[c])), likewise max, clipped by the activation
 * (relu: at 0 from below; relu6: also at 6 from above), recorded into *r (mt_fqt_range_see).
 */
void mt_fqt_acc_range_f32(int32_t channels, const int32_t *acc_min, const int32_t *acc_max, float s_x,
                          const float *s_w, int32_t act, mt_fqt_range *r);

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

/* Hyper-parameters and per-layer state of the FQT int8 update (float32 rates). */
typedef struct {
    float lr;         /* learning rate */
    float alpha_norm; /* EMA rate of the gradient mean / standard deviation */
    float alpha_w;    /* EMA rate of the per-channel weight ranges */
    float g_scale;    /* float32(s_x * s_e): real value of one weight-gradient unit */
    float gb_scale;   /* s_e: real value of one bias-gradient unit */
} mt_fqt_upd_params;

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

/* ------------------------------------------------------------------ precision uint8 (seed A) */

/*
 * uint8 qparams of [lo, hi] (seed A; quant.qparams.qparams_from_range, uint8): lo = min(lo, 0),
 * hi = max(hi, 0), s = (hi - lo) / 255 (1.0 if 0, at least 2^-126), z = clamp(floor(-lo / s), 0, 255).
 */
void mt_fqt_qparams_u8(float lo, float hi, float *scale, int32_t *zero_point);

/* Output clamp of a fused activation in the uint8 domain (act 0 none, 1 relu, 2 relu6). */
void mt_fqt_act_range_u8(float scale, int32_t zero_point, int32_t act, int32_t *act_min, int32_t *act_max);

/*
 * uint8 conv forward: acc = b + sum (x - z_x)(w - z_w) (z_x, z_y, clamps in params),
 * y = clamp(floor(float32(acc) * multiplier) + z_y, act_min, act_max); tensor extremes of acc merged
 * into *acc_min / *acc_max.
 */
mt_status mt_conv2d_fwd_u8_range(const mt_conv_params *params,
                                 int32_t w_zero_point,
                                 float multiplier,
                                 const mt_dims *input_dims,
                                 const uint8_t *input,
                                 const mt_dims *filter_dims,
                                 const uint8_t *filter,
                                 const int32_t *bias,
                                 const mt_dims *output_dims,
                                 uint8_t *output,
                                 int32_t *acc_min,
                                 int32_t *acc_max);

/* uint8 linear forward, as mt_conv2d_fwd_u8_range. */
mt_status mt_linear_fwd_u8_range(const mt_linear_params *params,
                                 int32_t w_zero_point,
                                 float multiplier,
                                 int32_t batch,
                                 const uint8_t *input,
                                 int32_t in_features,
                                 const uint8_t *weight,
                                 const int32_t *bias,
                                 int32_t out_features,
                                 uint8_t *output,
                                 int32_t *acc_min,
                                 int32_t *acc_max);

/* uint8 max pooling; argmax (or NULL) gets the first maximum's tap i * kw + j. */
mt_status mt_maxpool_fwd_u8_argmax(const mt_pool_params *params,
                                   const mt_dims *input_dims,
                                   const uint8_t *input,
                                   const mt_dims *output_dims,
                                   uint8_t *output,
                                   uint8_t *argmax);

/* Max-pool backward of uint8 errors for tiling windows; inputs not at an argmax get e_zero_point. */
mt_status mt_maxpool_bwd_u8(const mt_pool_params *params,
                            int32_t e_zero_point,
                            const mt_dims *input_dims,
                            const mt_dims *output_dims,
                            const uint8_t *argmax,
                            const uint8_t *e_y,
                            uint8_t *e_x);

/* ReLU mask of uint8 errors: e_out = e_in where lo < y (and y < hi if hi <= 255), else e_zero_point. */
mt_status mt_relu_bwd_u8(int32_t size, int32_t lo, int32_t hi, const uint8_t *y, int32_t e_zero_point,
                         const uint8_t *e_in, uint8_t *e_out);

/* The logits' uint8 error from the Q24 error (range and seeding as mt_fqt_logit_error_s8). */
mt_status mt_fqt_logit_error_u8(int32_t size, const int32_t *err, int32_t seed, mt_fqt_range *r, uint8_t *e_out);

/*
 * uint8 transposed conv: acc = sum (e - z_e)(w - z_w); extremes merged; with e_x non-NULL,
 * e_x = clamp(floor(float32(acc) * multiplier) + out_zero_point, 0, 255). Dense convs only.
 */
mt_status mt_conv2d_bwd_in_u8(const mt_conv_params *params,
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
                              int32_t *acc_min,
                              int32_t *acc_max);

/* uint8 linear error propagation, as mt_conv2d_bwd_in_u8. */
mt_status mt_linear_bwd_in_u8(int32_t batch,
                              int32_t e_zero_point,
                              int32_t w_zero_point,
                              int32_t out_features,
                              const uint8_t *e,
                              const uint8_t *weight,
                              int32_t in_features,
                              float multiplier,
                              int32_t out_zero_point,
                              uint8_t *e_x,
                              int32_t *acc_min,
                              int32_t *acc_max);

/*
 * Per-sample uint8 weight gradient of one sample (seed A): g = sum (e - z_e)(x - z_x) per element,
 * extremes merged into *g_min / *g_max; with grad non-NULL, grad = clamp(floor(float32(g) * m) + z_g,
 * 0, 255) and grad_bias accumulates sum (e - z_e). Dense convs only.
 */
mt_status mt_conv2d_bwd_w_u8(const mt_conv_params *params,
                             int32_t e_zero_point,
                             const mt_dims *input_dims,
                             const uint8_t *input,
                             const mt_dims *output_dims,
                             const uint8_t *e,
                             const mt_dims *filter_dims,
                             float multiplier,
                             int32_t grad_zero_point,
                             uint8_t *grad,
                             int32_t *grad_bias,
                             int32_t *g_min,
                             int32_t *g_max);

/* Per-sample uint8 linear weight gradient, as mt_conv2d_bwd_w_u8. */
mt_status mt_linear_bwd_w_u8(int32_t input_zero_point,
                             int32_t e_zero_point,
                             const uint8_t *input,
                             int32_t in_features,
                             const uint8_t *e,
                             int32_t out_features,
                             float multiplier,
                             int32_t grad_zero_point,
                             uint8_t *grad,
                             int32_t *grad_bias,
                             int32_t *g_min,
                             int32_t *g_max);

/*
 * Seed A's in-place uint8 update of one layer (see mt_fqt_upd_u8.c for the float32 order): p->g_scale
 * is the gradient's uint8 scale, p->gb_scale the error scale; per-tensor s_w, z_w and range lo / hi
 * (in/out); rounding to nearest; bias_step out as in mt_fqt_upd_s8.
 */
mt_status mt_fqt_upd_u8(const mt_fqt_upd_params *p,
                        int32_t channels,
                        int32_t per_channel,
                        const uint8_t *grad,
                        int32_t grad_zero_point,
                        const int32_t *grad_bias,
                        float *norm_mu,
                        float *norm_sd,
                        int8_t *norm_init,
                        uint8_t *w,
                        float *s_w,
                        int32_t *w_zero_point,
                        float *w_lo,
                        float *w_hi,
                        float *bias_step);

/* mt_fqt_bias_rescale_s32 for uint8 weights: scale float32(s_x) * s_w (per tensor), room from w - z_w;
   every channel moves when bias_step is given (a trained layer), else where the scale changed. */
mt_status mt_fqt_bias_rescale_u8(int32_t channels,
                                 int32_t per_channel,
                                 const uint8_t *w,
                                 int32_t w_zero_point,
                                 float s_x,
                                 float s_w,
                                 const float *bias_step,
                                 float *acc_scale,
                                 int32_t *bias);

/*
 * Jump the xorshift32 stream ahead: state <- T^n state with the 32 columns of T^n (the image of
 * each unit bit, computed by the exporter); the same as n calls of mt_xorshift32_next.
 */
void mt_xorshift32_jump(uint32_t *state, const uint32_t *columns);

/* Jump by n with the columns of T^(2^i), i < bits, at powers + 32 * i (n < 2^bits). */
void mt_xorshift32_jump_n(uint32_t *state, uint32_t n, const uint32_t *powers, int32_t bits);

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

/* ------------------------------------------------------------------ precisions mixed and float32 */

/*
 * Seed A's mixed precision keeps uint8 weights and activations (the uint8 kernels above) with
 * float32 errors and gradients; float32 is float32 throughout. Every float32 sum below starts
 * from +0.0 and adds one rounded product at a time in the stated order (docs/integer-semantics.md
 * 13.8, the order of FQTConfig(exact_float_order=True)); a zero term is skipped where it cannot
 * change the sum (a running sum from +0.0 is never -0.0).
 */

/* A stored weight gradient (or bias gradient): the real value of element k is
   float32(v[k] - zero_point) * scale for the integer types, v[k] * scale for float32. */
typedef struct {
    const void *data;   /* [O, K] (weights) or [O] (biases) */
    int32_t type;       /* MT_FQT_GRAD_U8, _S16, _S32 or _F32 */
    int32_t zero_point; /* subtracted from integer values (uint8: the gradient's zero point) */
    float scale;        /* real value of one unit */
} mt_fqt_grad;

#define MT_FQT_GRAD_U8 0
#define MT_FQT_GRAD_S16 1
#define MT_FQT_GRAD_S32 2
#define MT_FQT_GRAD_F32 3

/* The logits' float32 error from the Q24 error p - onehot: e = float32(err) * 2^-24. */
mt_status mt_fqt_logit_error_f32(int32_t size, const int32_t *err, float *e_out);

/*
 * float32 logits of a batch as the loss sees them (fqt._loss, precision float32): int8 qparams of
 * [lo, hi] (mt_fqt_qparams_s8), q = clamp(round_half_away(x / s), -128 - z, 127 - z) + z.
 *   size in: values;  logits in: [size] float32;  q out: [size] int8;  scale, zero_point out
 */
mt_status mt_fqt_logits_s8_f32(int32_t size, const float *logits, float lo, float hi, int8_t *q, float *scale,
                               int32_t *zero_point);

/* ReLU mask of float32 errors on uint8 outputs: e_out = e_in where lo < y (and y < hi if hi <= 255), else 0. */
mt_status mt_relu_bwd_u8_f32(int32_t size, int32_t lo, int32_t hi, const uint8_t *y, const float *e_in,
                             float *e_out);

/* ReLU (act 1) / ReLU6 (act 2) mask of float32 errors on float32 outputs: keep 0 < y (and y < 6). */
mt_status mt_relu_bwd_f32(int32_t size, int32_t act, const float *y, const float *e_in, float *e_out);

/* Max-pool backward of float32 errors for tiling windows: each window's error to its argmax, others 0. */
mt_status mt_maxpool_bwd_f32(const mt_pool_params *params,
                             const mt_dims *input_dims,
                             const mt_dims *output_dims,
                             const uint8_t *argmax,
                             const float *e_y,
                             float *e_x);

/*
 * Transposed conv of float32 errors with uint8 weights (mixed): per input element, the taps (i, j)
 * that reach it in row-major order, each tap's t = sum_o e[o] * float32(w[o, i, j, c] - z_w) from
 * +0.0 in o order, added from +0.0 in tap order; then e_x = acc * w_scale. Dense convs only.
 */
mt_status mt_conv2d_bwd_in_u8_f32(const mt_conv_params *params,
                                  int32_t w_zero_point,
                                  float w_scale,
                                  const mt_dims *output_dims,
                                  const float *e,
                                  const mt_dims *filter_dims,
                                  const uint8_t *filter,
                                  const mt_dims *input_dims,
                                  float *e_x);

/* Linear error propagation (mixed): e_x[b, i] = (sum over o in order of e[b, o] * float32(w[o, i] - z_w)) * w_scale. */
mt_status mt_linear_bwd_in_u8_f32(int32_t batch,
                                  int32_t w_zero_point,
                                  float w_scale,
                                  int32_t out_features,
                                  const float *e,
                                  const uint8_t *weight,
                                  int32_t in_features,
                                  float *e_x);

/*
 * Weight and bias gradients of one sample (mixed), accumulated: grad[o, i, j, c] += t with
 * t = sum over positions (y, x) row-major of float32(x - z_x) * e[o] from +0.0 (padding skipped);
 * grad_bias[o] += sum over positions of e[o]. Zero both before the first sample of a step.
 */
mt_status mt_conv2d_bwd_w_u8_f32(const mt_conv_params *params,
                                 const mt_dims *input_dims,
                                 const uint8_t *input,
                                 const mt_dims *output_dims,
                                 const float *e,
                                 const mt_dims *filter_dims,
                                 float *grad,
                                 float *grad_bias);

/* Linear gradients of one sample (mixed), accumulated: grad[o, i] += e[o] * float32(x[i] - z_x), grad_bias[o] += e[o]. */
mt_status mt_linear_bwd_w_u8_f32(int32_t input_zero_point,
                                 const uint8_t *input,
                                 int32_t in_features,
                                 const float *e,
                                 int32_t out_features,
                                 float *grad,
                                 float *grad_bias);

/*
 * Seed A's uint8 update of one layer from a gradient in any stored format (mixed: float32; uint8
 * with a batch: the int16 sum of the samples' centred uint8 gradients), with partial updates:
 * channels with upd[o] == 0 (upd NULL: none) keep their statistics and take g_hat = 0, but are
 * requantized with the tensor's new qparams like every other. Otherwise the order of mt_fqt_upd_u8.
 *   grad in: [O, K];  grad_bias in: [O];  p->g_scale, p->gb_scale unused (the mt_fqt_grad scales)
 */
mt_status mt_fqt_upd_u8_any(const mt_fqt_upd_params *p,
                            int32_t channels,
                            int32_t per_channel,
                            const mt_fqt_grad *grad,
                            const mt_fqt_grad *grad_bias,
                            const uint8_t *upd,
                            float *norm_mu,
                            float *norm_sd,
                            int8_t *norm_init,
                            uint8_t *w,
                            float *s_w,
                            int32_t *w_zero_point,
                            float *w_lo,
                            float *w_hi,
                            float *bias_step);

/*
 * mt_fqt_bias_rescale_u8 with partial updates: a channel moves when its scale changed or when
 * upd[c] (a trained layer's updated channels; bias_step and upd both given), as fqt._rescale_bias.
 */
mt_status mt_fqt_bias_rescale_u8_upd(int32_t channels,
                                     int32_t per_channel,
                                     const uint8_t *w,
                                     int32_t w_zero_point,
                                     float s_x,
                                     float s_w,
                                     const float *bias_step,
                                     const uint8_t *upd,
                                     float *acc_scale,
                                     int32_t *bias);

/*
 * Partial updates of uint8 errors: as mt_fqt_topk_s8 with magnitudes sum |e - z_e| (exact int32)
 * and pruned errors set to z_e (a centred 0).
 */
mt_status mt_fqt_topk_u8(int32_t rows, int32_t channels, int32_t k, int32_t e_zero_point, uint8_t *e,
                         int32_t *list, uint8_t *mask, int32_t *kept);

/*
 * Partial updates of float32 errors: magnitudes sum |e| over the rows in order from +0.0
 * (partial.magnitudes), ranked as mt_fqt_topk_s8 (ties to the lower index); pruned errors set to 0.
 *   scratch: [channels] float32 (the magnitudes)
 */
mt_status mt_fqt_topk_f32(int32_t rows, int32_t channels, int32_t k, float *e, float *scratch, int32_t *list,
                          uint8_t *mask, int32_t *kept);

/*
 * Per-sample uint8 weight gradient (seed A) accumulated over a batch: as mt_conv2d_bwd_w_u8 with
 * grad non-NULL, but grad16 += q - z_g (the centred uint8 value; |sum| <= 255 * batch, int16 for
 * batches up to 128) instead of storing q.
 */
mt_status mt_conv2d_bwd_w_u8_s16(const mt_conv_params *params,
                                 int32_t e_zero_point,
                                 const mt_dims *input_dims,
                                 const uint8_t *input,
                                 const mt_dims *output_dims,
                                 const uint8_t *e,
                                 const mt_dims *filter_dims,
                                 float multiplier,
                                 int32_t grad_zero_point,
                                 int16_t *grad16,
                                 int32_t *grad_bias,
                                 int32_t *g_min,
                                 int32_t *g_max);

/* Linear per-sample uint8 gradient accumulated over a batch, as mt_conv2d_bwd_w_u8_s16. */
mt_status mt_linear_bwd_w_u8_s16(int32_t input_zero_point,
                                 int32_t e_zero_point,
                                 const uint8_t *input,
                                 int32_t in_features,
                                 const uint8_t *e,
                                 int32_t out_features,
                                 float multiplier,
                                 int32_t grad_zero_point,
                                 int16_t *grad16,
                                 int32_t *grad_bias,
                                 int32_t *g_min,
                                 int32_t *g_max);

/*
 * float32 conv forward (precision float32): acc = sum over k = (i, j, c) of the OHWI row, in order
 * from +0.0, of x * w (padding taps skipped: real 0), then y = act(acc + b) with act 0 none,
 * 1 relu max(z, 0), 2 relu6 min(max(z, 0), 6). Dense convs only.
 */
mt_status mt_conv2d_fwd_f32(const mt_conv_params *params,
                            int32_t act,
                            const mt_dims *input_dims,
                            const float *input,
                            const mt_dims *filter_dims,
                            const float *filter,
                            const float *bias,
                            const mt_dims *output_dims,
                            float *output);

/* float32 linear forward: y[b, o] = act((sum over i in order of x[b, i] * w[o, i]) + b[o]). */
mt_status mt_linear_fwd_f32(int32_t act,
                            int32_t batch,
                            const float *input,
                            int32_t in_features,
                            const float *weight,
                            const float *bias,
                            int32_t out_features,
                            float *output);

/* float32 max pooling; argmax (or NULL) gets the first maximum's tap i * kw + j. */
mt_status mt_maxpool_fwd_f32_argmax(const mt_pool_params *params,
                                    const mt_dims *input_dims,
                                    const float *input,
                                    const mt_dims *output_dims,
                                    float *output,
                                    uint8_t *argmax);

/* Transposed conv of float32 errors with float32 weights: as mt_conv2d_bwd_in_u8_f32 without z_w and w_scale. */
mt_status mt_conv2d_bwd_in_f32(const mt_conv_params *params,
                               const mt_dims *output_dims,
                               const float *e,
                               const mt_dims *filter_dims,
                               const float *filter,
                               const mt_dims *input_dims,
                               float *e_x);

/* Linear error propagation, float32: e_x[b, i] = sum over o in order of e[b, o] * w[o, i]. */
mt_status mt_linear_bwd_in_f32(int32_t batch,
                               int32_t out_features,
                               const float *e,
                               const float *weight,
                               int32_t in_features,
                               float *e_x);

/* Weight and bias gradients of one sample from float32 inputs, accumulated (as mt_conv2d_bwd_w_u8_f32). */
mt_status mt_conv2d_bwd_w_f32(const mt_conv_params *params,
                              const mt_dims *input_dims,
                              const float *input,
                              const mt_dims *output_dims,
                              const float *e,
                              const mt_dims *filter_dims,
                              float *grad,
                              float *grad_bias);

/* Linear gradients of one sample from float32 inputs, accumulated: grad[o, i] += e[o] * x[i], grad_bias[o] += e[o]. */
mt_status mt_linear_bwd_w_f32(const float *input,
                              int32_t in_features,
                              const float *e,
                              int32_t out_features,
                              float *grad,
                              float *grad_bias);

/*
 * The float32 update of one layer (fqt._standardize + fqt._update_layer, float32 weights): the
 * standardization of mt_fqt_upd_s8 on the real gradients grad[o, k] * p->g_scale and
 * grad_bias[o] * p->gb_scale, then w -= lr * g_hat, b -= lr * g_hat_b (channels with upd[o]:
 * upd NULL = all).
 */
mt_status mt_fqt_upd_f32(const mt_fqt_upd_params *p,
                         int32_t channels,
                         int32_t per_channel,
                         const float *grad,
                         const float *grad_bias,
                         const uint8_t *upd,
                         float *norm_mu,
                         float *norm_sd,
                         int8_t *norm_init,
                         float *w,
                         float *bias);

#ifdef __cplusplus
}
#endif

#endif /* MT_FQT_H */
