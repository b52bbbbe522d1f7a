/*
 * mcutrain runtime: the training kernels (public API).
 *
 * The C twins of the training-time operations of docs/integer-semantics.md: the xorshift32
 * stream (section 5), rounding (section 4), the integer softmax cross-entropy (section 9), the
 * zeroth-order (ZO) perturbation, estimate and update operations (section 12) and the BP-QAS
 * straight-through backward kernels and QAS updates (section 12.6). The Python twins are in
 * mcutrain.quant (rng, rounding, loss), mcutrain.methods (zo_estimator, qas, bp_qas) and
 * mcutrain.engines.ste_kernels.
 *
 * Integer kernels are bit-identical to Python in any summation order. Float kernels exist only
 * where a method defines float arithmetic (the QAS update, BP-QAS errors); each states its
 * operation order, and they must be compiled without contraction (-ffp-contract=off) and
 * without fast-math (docs/integer-semantics.md section 11).
 *
 * Conventions as in mt_nn.h: kernels overwrite their outputs unless the name or the comment
 * says "accumulate"; they never allocate; they return MT_OK, or MT_ERR_ARG for a NULL pointer or
 * an inconsistent size. Layouts: activations NHWC, filters OHWI, linear weights (O, I).
 */
#ifndef MT_TRAIN_H
#define MT_TRAIN_H

#include <float.h>
#include <stddef.h>
#include <stdint.h>

#include "mt_types.h"

/* Training only (the inference runtime has no float). The learning rates model_train_step accepts: finite and > 0. False for NaN (every comparison
 * with NaN is false), +-inf, 0, -0 and negative rates; such an lr would rewrite every weight
 * (and a float-to-int cast of inf or NaN is undefined behaviour), so the step refuses it. */
#define MT_LR_VALID(lr) ((lr) > 0.0f && (lr) <= FLT_MAX)


#ifdef __cplusplus
extern "C" {
#endif /* defined(__cplusplus) */

/* ------------------------------------------------------------------ xorshift32 (section 5) */

/* The generator state for `seed`: seed itself, or 2463534242 for seed 0 (never 0). */
uint32_t mt_xorshift32_seed(uint32_t seed);

/*
 * Marsaglia's xorshift32 (13, 17, 5): updates *state, then returns it.
 *   state  in/out: the generator state, never 0
 */
uint32_t mt_xorshift32_next(uint32_t *state);

/* The next n outputs into out[0..n-1] (n >= 0), exactly n calls of mt_xorshift32_next. */
void mt_xorshift32_draw_u32(uint32_t *state, int32_t n, uint32_t *out);

/* One Rademacher value from one draw: +1 if the top bit of the draw is 0, else -1. */
int32_t mt_xorshift32_rademacher(uint32_t *state);

/* One uniform float32 in [0, 1 - 2^-24] from one draw: float32(u >> 8) * 2^-24 (exact). */
float mt_xorshift32_uniform01(uint32_t *state);

/* ------------------------------------------------------------------ rounding (section 4) */

/* round_half_away(x) for a finite float32 x (C99 roundf without libm); returns a float32. */
float mt_round_half_away_f32(float x);

/* Stochastic rounding floor(x + r), r = mt_xorshift32_uniform01(state) (one draw); float32. */
float mt_round_stochastic_f32(float x, uint32_t *state);

/*
 * Integer stochastic rounding of x / 2^n: (x + (u >> (32 - n))) >> n with a floor shift, one
 * draw u (none when n == 0).
 *   x  in: int64 with |x| + 2^n < 2^63;  n  in: [0, 24]
 */
int64_t mt_stochastic_shift_right_s64(int64_t x, int32_t n, uint32_t *state);

/* ------------------------------------------------------------------ loss (section 9) */

/*
 * Integer softmax cross-entropy of int8 logits, per sample (no libm, int64 arithmetic).
 *   batch    in:  B >= 1;  classes  in: K in [1, 65536]
 *   logits   in:  [B, K] int8, real value scale * (q - z) (the zero point cancels)
 *   scale    in:  the logits' float32 scale, finite and > 0 (subnormal allowed)
 *   labels   in:  [B] int32 class ids in [0, K)
 *   loss     out: [B] int32 Q16 loss ln(sum exp) - x_label, or NULL
 *   err      out: [B, K] int32 Q24 error p - onehot(label), or NULL
 * Returns MT_ERR_ARG for a bad size, scale or label.
 */
mt_status mt_softmax_ce_s8(int32_t batch,
                           int32_t classes,
                           const int8_t *logits,
                           float scale,
                           const int32_t *labels,
                           int32_t *loss,
                           int32_t *err);

/* ------------------------------------------------------------------ ZO (section 12) */

/*
 * Weight perturbation of one layer, out of place (the originals stay untouched because a
 * clamped perturbation cannot be undone from the perturbed values): draws ceil((nw + nb) / 32)
 * values, 32 signs per draw (element e: bit e % 32 of draw e / 32, set = -1), weights first
 * (OHWI C order), then the bias, in one stream:
 *   w_out[e] = clamp(w[e] + sigma_w * u, -127, 127),  b_out[c] = sat32(b[c] + sigma_b * u)
 *   state    in/out: the method's stream
 *   sigma_w, sigma_b in: >= 1 (int8 steps, int32 bias steps)
 *   nw, w    in: [nw] int8 weights;  nb, b in: [nb] int32 biases (nw, nb >= 0)
 *   w_out, b_out out: [nw] int8, [nb] int32 (may be the unit's perturbation buffers)
 */
mt_status mt_zo_perturb_wp_s8(uint32_t *state,
                              int32_t sigma_w,
                              int32_t sigma_b,
                              int32_t nw,
                              const int8_t *w,
                              int32_t nb,
                              const int32_t *b,
                              int8_t *w_out,
                              int32_t *b_out);

/*
 * Node perturbation of a layer's int8 output with the STE mask, out of place; draws
 * ceil(size / 32) values, 32 signs per draw (masked elements consume theirs too):
 *   y_out[e] = clamp(y[e] + sigma * u * m, act_min, act_max),  m = [act_min < y[e] < act_max]
 * (y produced by a layer with this clamp is already inside it; others are clamped too)
 *   size  in: B * d_out;  y in: [size] int8;  y_out out: [size] int8
 */
mt_status mt_zo_perturb_np_s8(uint32_t *state,
                              int32_t sigma,
                              int32_t act_min,
                              int32_t act_max,
                              int32_t size,
                              const int8_t *y,
                              int8_t *y_out);

/*
 * WP forward-difference sum, accumulating: sums[e] += dl * u[e] for e < d, where u replays the
 * query's draws (pass a copy of the stream state taken before mt_zo_perturb_wp_s8; the copy
 * advances by ceil(d / 32); accumulate weights and biases in one call of d = nw + nb).
 *   dl    in: L_i - L0, the batch loss difference (int64, |dl| < B * 2^24)
 *   sums  in/out: [d] int64 (|sum| < n * B * 2^24)
 */
mt_status mt_zo_accumulate_wp_s64(uint32_t *state, int64_t dl, int32_t d, int64_t *sums);

/*
 * NP node-gradient sum, accumulating: g[b, j] += dl[b] * u[b, j] * m[b, j], replaying the
 * query's draws (a copy of the state before mt_zo_perturb_np_s8; it advances by ceil(B * d_out / 32)).
 *   dl  in: [B] int32 per-sample loss differences l_i[b] - l0[b] (|dl| < 2^24)
 *   y   in: [B, d_out] int8 unperturbed output (for the mask m, as in mt_zo_perturb_np_s8)
 *   g   in/out: [B, d_out] int32; exact for at most MT_ZO_MAX_QUERIES_S32 queries
 */
mt_status mt_zo_accumulate_np_s32(uint32_t *state,
                                  int32_t batch,
                                  int32_t d_out,
                                  const int32_t *dl,
                                  const int8_t *y,
                                  int32_t act_min,
                                  int32_t act_max,
                                  int32_t *g);

/* Largest query count whose NP sums fit int32: 127 queries * 2^24 < 2^31. */
#define MT_ZO_MAX_QUERIES_S32 127

/*
 * The GNS shrink gamma = float32(numer) / float32(numer + dim_minus_one), or 1 when
 * `enabled` is 0. numer = n (WP) or B * n (NP); dim_minus_one = perturbed entries - 1.
 */
float mt_zo_gns_gamma_f32(int64_t numer, int64_t dim_minus_one, int32_t enabled);

/*
 * The scalar coefficient c0 = (gamma / float32(queries * sigma * batch)) * 2^-16 (the 1/(n sigma),
 * the 1/B of the mean and the Q16 loss unit), float32 in this order.
 */
float mt_zo_coef_f32(float gamma, int32_t queries, int32_t sigma, int32_t batch);

/*
 * NP per-channel coefficients coef[c] = c0 * ((s_x * s_w[c]) / s_y), float32 in this order
 * (the requantization slope M_c turns an output gradient into an accumulator gradient).
 *   channels in: O;  s_w in: [O] float32;  coef out: [O]
 */
mt_status mt_zo_np_coef_f32(float c0, float s_x, const float *s_w, float s_y, int32_t channels, float *coef);

/*
 * Exact int64 local weight gradient of a conv2d (plain, grouped or depthwise) from an int32
 * accumulator gradient g (NP recovery, section 12.4):
 *   grad_w[o,ky,kx,i] = sum_{n,oy,ox} (x[n, oy*sh - pt + ky, ox*sw - pl + kx, gi*Cg + i] - z_x)
 *                       * g[n,oy,ox,o]   (padding contributes 0; gi = o / (O / groups))
 *   grad_b[o] = sum_{n,oy,ox} g[n,oy,ox,o]
 *   params       in: input_zero_point, strides, pad_top/left, groups (the other fields unused)
 *   input_dims   in: (N, H, W, C);  input [N, H, W, C] int8
 *   output_dims  in: (N, Ho, Wo, O);  g [N, Ho, Wo, O] int32
 *   filter_dims  in: (O, kh, kw, C / groups);  grad_w out: [O, kh, kw, C / groups] int64
 *   grad_b       out: [O] int64, or NULL
 * Bound: each product is below 255 * 2^31 < 2^39; sums of fewer than 2^24 products fit int64.
 */
mt_status mt_conv2d_bwd_w_s8_s32(const mt_conv_params *params,
                                 const mt_dims *input_dims,
                                 const int8_t *input,
                                 const mt_dims *output_dims,
                                 const int32_t *g,
                                 const mt_dims *filter_dims,
                                 int64_t *grad_w,
                                 int64_t *grad_b);

/*
 * Exact int64 local weight gradient of a linear layer:
 *   grad_w[o, i] = sum_n (x[n, i] - z_x) * g[n, o],  grad_b[o] = sum_n g[n, o]
 *   input [N, I] int8;  g [N, O] int32;  grad_w out: [O, I] int64;  grad_b out: [O] int64 or NULL
 */
mt_status mt_linear_bwd_w_s8_s32(int32_t input_zero_point,
                                 int32_t batch,
                                 const int8_t *input,
                                 int32_t in_features,
                                 const int32_t *g,
                                 int32_t out_features,
                                 int64_t *grad_w,
                                 int64_t *grad_b);

/* ------------------------------------------------------------------ QAS update (12.5) */

/*
 * Update factors k[c] = (lr * coef[c]) / (scale[c] * scale[c]), float32 in this order
 * (quantization-aware scaling, Lin et al., NeurIPS 2022); k[c] = lr * coef[c] when scale is NULL.
 *   coef   in: [channels] float32 (the ZO coefficient, or 1.0 for BP-QAS)
 *   scale  in: [channels] s_w[c] for weights, s_x * s_w[c] for biases (mt_qas_bias_scale_f32)
 */
mt_status mt_qas_factor_f32(float lr, int32_t channels, const float *coef, const float *scale, float *k);

/* Bias scales out[c] = s_x * s_w[c] (float32). */
mt_status mt_qas_bias_scale_f32(float s_x, const float *s_w, int32_t channels, float *out);

/*
 * QAS update of int8 weights from int64 gradient sums, in place:
 *   w[c, e] = clamp(w[c, e] - limit(round_half_away(clamp(float32(sums[c, e]) * k[c], +-2^30))), -127, 127)
 * where limit clamps the step to +-max_step (1..254; 254 or more: no limit)
 * with float32(int64) rounded to nearest even.
 *   channels in: O;  per_channel in: entries per channel (kh*kw*C/groups or I)
 *   sums in: [O, per_channel] int64;  k in: [O] float32;  w in/out: [O, per_channel] int8
 */
mt_status mt_qas_upd_s8_s64(int32_t channels,
                            int32_t per_channel,
                            const int64_t *sums,
                            const float *k,
                            uint32_t *round_state,
                            int32_t max_step,
                            int8_t *w);

/* The same for int32 biases (one entry per channel): b[c] = sat32(b[c] - step). */
mt_status mt_qas_upd_s32_s64(int32_t channels, const int64_t *sums, const float *k, int32_t *b);

/* QAS update of int8 weights from a float32 gradient (BP-QAS): step = round(clamp(g * k[c])).
 *   round_state  in/out: NULL: round to nearest; else the xorshift32 state of stochastic rounding,
 *                one mt_xorshift32_uniform01 draw per weight in index order (also mt_qas_upd_s8_s64) */
mt_status mt_qas_upd_s8_f32(int32_t channels,
                            int32_t per_channel,
                            const float *grad,
                            const float *k,
                            uint32_t *round_state,
                            int8_t *w);

/* The same for int32 biases from a float32 gradient. */
mt_status mt_qas_upd_s32_f32(int32_t channels, const float *grad, const float *k, int32_t *b);

/*
 * SGD momentum, in place: velocity[e] = momentum * velocity[e] + grad[e] (float32, product then
 * sum, no FMA). A zero-initialised velocity gives velocity = grad on the first step.
 */
mt_status mt_sgd_momentum_f32(int32_t size, float momentum, const float *grad, float *velocity);

/* ------------------------------------------------------------------ BP-QAS STE kernels (12.6) */

/*
 * Error of the logits from the Q24 loss error: e[b, k] = (float32(err[b, k]) * c) * scale,
 * c = float32(2^-24 / B) (float64 quotient rounded once). size = B * K.
 */
mt_status mt_softmax_ce_bwd_s32_f32(int32_t batch, int32_t classes, const int32_t *err, float scale, float *e);

/*
 * Requantization backward (STE): e_acc[m, c] = e_y[m, c] * slope[c] where act_min < y < act_max,
 * else 0 (float32 product). rows = N * Ho * Wo (or N), channels = O, slope[c] = (s_x * s_w[c]) / s_y.
 */
mt_status mt_requant_bwd_s8_f32(int32_t rows,
                                int32_t channels,
                                const float *e_y,
                                const int8_t *y,
                                const float *slope,
                                int32_t act_min,
                                int32_t act_max,
                                float *e_acc);

/*
 * Bias gradient: grad_b[c] = sum over rows m = 0, 1, ... of e_acc[m, c] (float32, sequential
 * from 0). e_acc [rows, channels].
 */
mt_status mt_bias_bwd_f32(int32_t rows, int32_t channels, const float *e_acc, float *grad_b);

/*
 * Conv2d input error (transposed convolution), float32:
 *   e_x[n,y,x,gi*Cg+i] = sum over taps (ky, kx) in row-major order of
 *                        t(ky, kx) = sum over o = gi*Og .. gi*Og + Og - 1 of w[o,ky,kx,i] * e_acc[n,oy,ox,o]
 *   with oy = (y + pt - ky) / sh, ox = (x + pl - kx) / sw for taps that hit an output position.
 * Each t is summed from 0 in o order, then the taps are added in order (col2im's order).
 * filter [O, kh, kw, C/groups] int8; e_acc [N, Ho, Wo, O]; e_x out [N, H, W, C].
 */
mt_status mt_conv2d_bwd_in_s8_f32(const mt_conv_params *params,
                                  const mt_dims *output_dims,
                                  const float *e_acc,
                                  const mt_dims *filter_dims,
                                  const int8_t *filter,
                                  const mt_dims *input_dims,
                                  float *e_x);

/*
 * Conv2d weight gradient, float32: grad_w[o,ky,kx,i] = sum over (n, oy, ox) in C order of
 * float32(x - z_x) * e_acc[n,oy,ox,o] (product rounded, then added; padding skipped).
 */
mt_status mt_conv2d_bwd_w_s8_f32(const mt_conv_params *params,
                                 const mt_dims *input_dims,
                                 const int8_t *input,
                                 const mt_dims *output_dims,
                                 const float *e_acc,
                                 const mt_dims *filter_dims,
                                 float *grad_w);

/* Linear input error: e_x[n, i] = sum over o in order of float32(w[o, i]) * e_acc[n, o]. */
mt_status mt_linear_bwd_in_s8_f32(int32_t batch,
                                  int32_t out_features,
                                  const float *e_acc,
                                  const int8_t *weight,
                                  int32_t in_features,
                                  float *e_x);

/* Linear weight gradient: grad_w[o, i] = sum over n in order of float32(x[n, i] - z_x) * e_acc[n, o]. */
mt_status mt_linear_bwd_w_s8_f32(int32_t input_zero_point,
                                 int32_t batch,
                                 const int8_t *input,
                                 int32_t in_features,
                                 const float *e_acc,
                                 int32_t out_features,
                                 float *grad_w);

/*
 * Max pooling backward: each window's error goes to its first maximum in tap order (row-major);
 * where windows overlap, an input element receives its shares in tap order (numpy's tap loop).
 */
mt_status mt_maxpool_bwd_s8_f32(const mt_pool_params *params,
                                const mt_dims *input_dims,
                                const int8_t *input,
                                const mt_dims *output_dims,
                                const int8_t *output,
                                const float *e_y,
                                float *e_x);

/*
 * Average pooling backward: share = e_y / float32(kh * kw) added to every tap of the window;
 * per input element the shares arrive in tap order (as numpy's tap loop).
 */
mt_status mt_avgpool_bwd_f32(const mt_pool_params *params,
                             const mt_dims *input_dims,
                             const mt_dims *output_dims,
                             const float *e_y,
                             float *e_x);

/* Global average pooling backward: e_x[n, h, w, c] = e_y[n, c] / float32(H * W). */
mt_status mt_global_avgpool_bwd_f32(const mt_dims *input_dims, const float *e_y, float *e_x);

/* Standalone relu/relu6 (and any clamp) backward: e_x = e_y where act_min < y < act_max, else 0. */
mt_status mt_relu_bwd_s8_f32(int32_t act_min, int32_t act_max, int32_t size, const int8_t *y,
                             const float *e_y, float *e_x);

/*
 * Residual add backward: e = e_y where act_min < y < act_max else 0; e_a = e * ratio_a,
 * e_b = e * ratio_b (ratio = s_in / s_y in float32). Either output may be NULL (that input needs no
 * error), not both; either may be e_y's storage (in place).
 */
mt_status mt_add_bwd_s8_f32(int32_t size,
                            const float *e_y,
                            const int8_t *y,
                            float ratio_a,
                            float ratio_b,
                            int32_t act_min,
                            int32_t act_max,
                            float *e_a,
                            float *e_b);

/*
 * Error sum of a tensor read by count >= 2 nodes: e[i] = ((parts[0][i] + parts[1][i]) + ...) in
 * float32, in the order given (the simulator's reverse graph order). e may be any part's storage.
 */
mt_status mt_error_sum_f32(int32_t size, int32_t count, const float *const *parts, float *e);

/* ------------------------------------------------------------------ fused per-channel kernels */

/*
 * Row `channel` (in [0, O)) of mt_conv2d_bwd_w_s8_f32, same order, bit for bit:
 *   grad_row out: [kh, kw, C / groups] float32
 * A generated step applies each row's update at once, so one row of gradient is stored.
 */
mt_status mt_conv2d_bwd_w_row_s8_f32(const mt_conv_params *params,
                                     const mt_dims *input_dims,
                                     const int8_t *input,
                                     const mt_dims *output_dims,
                                     const float *e_acc,
                                     const mt_dims *filter_dims,
                                     int32_t channel,
                                     float *grad_row);

/* Row `channel` of mt_linear_bwd_w_s8_f32 (sum over n in order), grad_row out: [I] float32. */
mt_status mt_linear_bwd_w_row_s8_f32(int32_t input_zero_point,
                                     int32_t batch,
                                     const int8_t *input,
                                     int32_t in_features,
                                     const float *e_acc,
                                     int32_t out_features,
                                     int32_t channel,
                                     float *grad_row);

/*
 * ZO NP recovery fused with the QAS update of output channel `channel`: each weight's exact
 * int64 sum (as mt_conv2d_bwd_w_s8_s32) is applied at once as in mt_qas_upd_s8_s64 with factor
 * k_w and the step limit max_step, then the bias's sum as in mt_qas_upd_s32_s64 with k_b. No
 * gradient buffer.
 *   round_state in/out: NULL (nearest) or the stochastic rounding's state, one draw per weight
 *   weight in/out: the layer's whole [O, kh, kw, C / groups] int8 filter (row `channel` changes)
 *   bias   in/out: the layer's [O] int32 bias (entry `channel` changes)
 */
mt_status mt_conv2d_bwd_w_qas_upd_s8_s32(const mt_conv_params *params,
                                         const mt_dims *input_dims,
                                         const int8_t *input,
                                         const mt_dims *output_dims,
                                         const int32_t *g,
                                         const mt_dims *filter_dims,
                                         int32_t channel,
                                         float k_w,
                                         float k_b,
                                         uint32_t *round_state,
                                         int32_t max_step,
                                         int8_t *weight,
                                         int32_t *bias);

/* The same for a linear layer: weight [O, I] int8 (row `channel` changes), bias [O] int32. */
mt_status mt_linear_bwd_w_qas_upd_s8_s32(int32_t input_zero_point,
                                         int32_t batch,
                                         const int8_t *input,
                                         int32_t in_features,
                                         const int32_t *g,
                                         int32_t out_features,
                                         int32_t channel,
                                         float k_w,
                                         float k_b,
                                         uint32_t *round_state,
                                         int32_t max_step,
                                         int8_t *weight,
                                         int32_t *bias);

#ifdef __cplusplus
}
#endif /* defined(__cplusplus) */

#endif /* MT_TRAIN_H */
