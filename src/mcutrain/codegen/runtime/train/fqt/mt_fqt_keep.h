/*
 * mcutrain runtime: the backward kernels of dynamic partial updates (public API).
 *
 * Seed A's partial updates (methods.partial) keep, per sample and layer, the k output channels
 * (conv filters, linear rows) whose errors have the largest magnitude; mt_fqt_topk_* zero the
 * others' errors and list the kept ones in increasing order. These kernels then do only the
 * kept work: the weight gradient of the kept rows and the error propagation summed over the kept
 * channels. Every sum they skip has only zero terms, so the results equal the dense kernels'
 * (mt_fqt.h) on the kept set, bit for bit; the rows they skip are left untouched (the update
 * with the same mask never reads them). Batch 1 (partial updates run one sample per step).
 * Precisions int8 (below), uint8 and float32 (after it).
 *
 * keep in: [n_keep] kept output channels, increasing, each in [0, O); 1 <= n_keep <= O.
 * DSP variants (MT_DSP, mt_arch.h) run the same loops as the dense DSP kernels over the kept
 * channels only and give the reference loops' results.
 */
#ifndef MT_FQT_KEEP_H
#define MT_FQT_KEEP_H

#include <stdint.h>

#include "mt_fqt.h"
#include "mt_types.h"

#ifdef __cplusplus
extern "C" {
#endif /* defined(__cplusplus) */

/*
 * Row stride of compacted errors: n_keep rounded up to a multiple of 4 (the extra columns hold 0),
 * at most O, so the buffer of the dense errors holds them and the DSP transposed conv keeps its
 * four-channel runs.
 */
#define MT_FQT_KEEP_STRIDE(n_keep, channels) \
    ((((n_keep) + 3) & ~3) < (channels) ? (((n_keep) + 3) & ~3) : (channels))

/*
 * The selection of mt_fqt_topk_*: the k largest of list[channels] (keys >= -1), ties to the lower
 * index, in O(channels * min(k, channels - k)). mask out: [channels] 1 kept / 0 pruned; list out:
 * the kept channels in increasing order (its first entries; the keys are overwritten). Returns
 * their count (k, for 0 <= k <= channels).
 */
int32_t mt_fqt_topk_select(int32_t channels, int32_t k, int32_t *list, uint8_t *mask);

/*
 * mt_fqt_prescale_s16 on the kept channels, compacted: e16[p, t] = prescaled e[p, keep[t]] for
 * t < n_keep, 0 for n_keep <= t < MT_FQT_KEEP_STRIDE(n_keep, O).
 *   rows in: positions;  channels in: O;  e in: [rows, O];  e16 out: [rows, stride]
 *   s_max out: max(s_w) over every channel (as the dense kernel: the accumulator's scale)
 */
mt_status mt_fqt_prescale_s16_keep(int32_t rows,
                                   int32_t channels,
                                   const int32_t *keep,
                                   int32_t n_keep,
                                   const int8_t *e,
                                   const float *s_w,
                                   int16_t *e16,
                                   float *s_max);

/*
 * Transposed conv over the kept output channels: acc[h, w, c] = sum over taps and t of
 * e16[oh, ow, t] * filter[keep[t], i, j, c], e16 compacted as mt_fqt_prescale_s16_keep writes it
 * (rows of MT_FQT_KEEP_STRIDE(n_keep, O));
 * extremes merged into *acc_min / *acc_max, e_x (if not NULL) as mt_conv2d_bwd_in_s8_s16.
 */
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
                                       int32_t *acc_max);

/* Linear error propagation over the kept rows: acc[i] = sum_t e16[t] * weight[keep[t], i]. */
mt_status mt_linear_bwd_in_s8_s16_keep(const int32_t *keep,
                                       int32_t n_keep,
                                       const int16_t *e16,
                                       const int8_t *weight,
                                       int32_t in_features,
                                       int32_t multiplier,
                                       int32_t shift,
                                       int8_t *e_x,
                                       int32_t *acc_min,
                                       int32_t *acc_max);

/*
 * Conv weight and bias gradients of the kept filters only, overwritten (not accumulated):
 * grad[keep[t], i, j, c] = sum over positions of e[p, keep[t]] * (x - z_x), grad_bias[keep[t]] =
 * sum of e[p, keep[t]]; other rows untouched.  e in: [positions, O] (full layout).
 */
mt_status mt_conv2d_bwd_w_s8_s8_keep(const mt_conv_params *params,
                                     const int32_t *keep,
                                     int32_t n_keep,
                                     const mt_dims *input_dims,
                                     const int8_t *input,
                                     const mt_dims *output_dims,
                                     const int8_t *e,
                                     const mt_dims *filter_dims,
                                     int32_t *grad,
                                     int32_t *grad_bias);

/* Linear gradients of the kept rows, overwritten: grad[o, i] = e[o] * (x[i] - z_x), grad_bias[o] = e[o]. */
mt_status mt_linear_bwd_w_s8_s8_keep(int32_t input_zero_point,
                                     const int32_t *keep,
                                     int32_t n_keep,
                                     const int8_t *input,
                                     int32_t in_features,
                                     const int8_t *e,
                                     int32_t *grad,
                                     int32_t *grad_bias);

/* ---- uint8 (seed A): centred errors, pruned ones at z_e; reference loops on every core ---- */

/* mt_conv2d_bwd_in_u8 summed over the kept output channels (e in: [positions, O], full layout). */
mt_status mt_conv2d_bwd_in_u8_keep(const mt_conv_params *params,
                                   const int32_t *keep,
                                   int32_t n_keep,
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

/* mt_linear_bwd_in_u8 (batch 1) summed over the kept rows. */
mt_status mt_linear_bwd_in_u8_keep(const int32_t *keep,
                                   int32_t n_keep,
                                   int32_t e_zero_point,
                                   int32_t w_zero_point,
                                   const uint8_t *e,
                                   const uint8_t *weight,
                                   int32_t in_features,
                                   float multiplier,
                                   int32_t out_zero_point,
                                   uint8_t *e_x,
                                   int32_t *acc_min,
                                   int32_t *acc_max);

/*
 * mt_conv2d_bwd_w_u8 on the kept rows: their uint8 gradients (grad non-NULL) and bias sums (added);
 * 0 merged into *g_min / *g_max when a row is pruned (its sums are 0 in the dense kernel).
 */
mt_status mt_conv2d_bwd_w_u8_keep(const mt_conv_params *params,
                                  const int32_t *keep,
                                  int32_t n_keep,
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

/* mt_linear_bwd_w_u8 on the kept rows, as mt_conv2d_bwd_w_u8_keep. */
mt_status mt_linear_bwd_w_u8_keep(const int32_t *keep,
                                  int32_t n_keep,
                                  int32_t input_zero_point,
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

/* ---- float32: the sequential sums of the dense kernels over the kept channels (exact, see .c) ---- */

/* mt_conv2d_bwd_in_f32 summed over the kept output channels (e in: [positions, O]). */
mt_status mt_conv2d_bwd_in_f32_keep(const mt_conv_params *params,
                                    const int32_t *keep,
                                    int32_t n_keep,
                                    const mt_dims *output_dims,
                                    const float *e,
                                    const mt_dims *filter_dims,
                                    const float *filter,
                                    const mt_dims *input_dims,
                                    float *e_x);

/* mt_linear_bwd_in_f32 (batch 1) summed over the kept rows. */
mt_status mt_linear_bwd_in_f32_keep(const int32_t *keep,
                                    int32_t n_keep,
                                    const float *e,
                                    const float *weight,
                                    int32_t in_features,
                                    float *e_x);

/* mt_conv2d_bwd_w_f32 of the kept rows, overwritten (+0.0 + the sum, as into a zeroed buffer). */
mt_status mt_conv2d_bwd_w_f32_keep(const mt_conv_params *params,
                                   const int32_t *keep,
                                   int32_t n_keep,
                                   const mt_dims *input_dims,
                                   const float *input,
                                   const mt_dims *output_dims,
                                   const float *e,
                                   const mt_dims *filter_dims,
                                   float *grad,
                                   float *grad_bias);

/* mt_linear_bwd_w_f32 of the kept rows, overwritten. */
mt_status mt_linear_bwd_w_f32_keep(const int32_t *keep,
                                   int32_t n_keep,
                                   const float *input,
                                   int32_t in_features,
                                   const float *e,
                                   float *grad,
                                   float *grad_bias);

#ifdef __cplusplus
}
#endif /* defined(__cplusplus) */

#endif /* MT_FQT_KEEP_H */
