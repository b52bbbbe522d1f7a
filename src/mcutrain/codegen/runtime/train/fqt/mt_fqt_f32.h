/*
 * mcutrain runtime, FQT precisions mixed (uint8 weights and activations, float32 errors
 * and gradients) and float32. Included through mt_fqt.h.
 *
 * Conventions as in mt_nn.h / mt_train.h: NHWC activations, OHWI filters, (O, I) linear weights;
 * kernels overwrite their outputs unless they say "accumulate"; no allocation; MT_OK or MT_ERR_ARG.
 */
#ifndef MT_FQT_F32_H
#define MT_FQT_F32_H

#include <stdint.h>

#include "mt_fqt_common.h"

#ifdef __cplusplus
extern "C" {
#endif /* defined(__cplusplus) */

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
#endif /* defined(__cplusplus) */

#endif /* MT_FQT_F32_H */
