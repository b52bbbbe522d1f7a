/*
 * mcutrain runtime, FQT: what every precision shares -- dynamic ranges (EMA), int8 / error
 * qparams, output multipliers and the update's hyper-parameters. Included through mt_fqt.h.
 *
 * Conventions as in mt_nn.h / mt_train.h: NHWC activations, OHWI filters, (O, I) linear weights;
 * kernels overwrite their outputs unless they say "accumulate"; no allocation; MT_OK or MT_ERR_ARG.
 */
#ifndef MT_FQT_COMMON_H
#define MT_FQT_COMMON_H

#include <stdint.h>

#include "mt_types.h"

#ifdef __cplusplus
extern "C" {
#endif /* defined(__cplusplus) */

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

/* Hyper-parameters and per-layer state of the FQT int8 update (float32 rates). */
typedef struct {
    float lr;         /* learning rate */
    float alpha_norm; /* EMA rate of the gradient mean / standard deviation */
    float alpha_w;    /* EMA rate of the per-channel weight ranges */
    float g_scale;    /* float32(s_x * s_e): real value of one weight-gradient unit */
    float gb_scale;   /* s_e: real value of one bias-gradient unit */
} mt_fqt_upd_params;

#ifdef __cplusplus
}
#endif /* defined(__cplusplus) */

#endif /* MT_FQT_COMMON_H */
