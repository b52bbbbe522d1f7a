/*
 * mcutrain runtime, FQT precision uint8 (seed A): uint8 activations, errors and weights with
 * float32 requantization, and the xorshift32 jump-ahead of its per-layer streams. Included through
 * mt_fqt.h.
 *
 * Conventions as in mt_nn.h / mt_train.h: NHWC activations, OHWI filters, (O, I) linear weights;
 * kernels overwrite their outputs unless they say "accumulate"; no allocation; MT_OK or MT_ERR_ARG.
 */
#ifndef MT_FQT_U8_H
#define MT_FQT_U8_H

#include <stdint.h>

#include "mt_fqt_common.h"

#ifdef __cplusplus
extern "C" {
#endif /* defined(__cplusplus) */

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

#ifdef __cplusplus
}
#endif /* defined(__cplusplus) */

#endif /* MT_FQT_U8_H */
