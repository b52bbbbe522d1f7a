/*
 * mcutrain runtime: mt_linear_bwd_in_s8_s16 and _keep (see mt_fqt_s8.h, mt_fqt_keep.h), the
 * ARMv6-M (Cortex-M0+) twins of train/fqt/mt_linear_bwd_in_s8_s16.c, bit-exact with them: four
 * inputs at a time keep their sums in registers over the error row (mt_m0_col4_run: per non-zero
 * error one LDRSH and, per input, LDRSB + MULS + ADD, where the reference walks one weight column
 * at a time), and requantize through mt_m0_requantize_single (no __muldi3). The inputs past the
 * last group of four, the listed-channel form and the kept-row form (partial updates) take the
 * reference body (mt_linear_bwd_in_s8_s16_ref.h).
 * NOTE: |acc| <= 32512 * 127 * O < 2^31 for O <= 520 (checked by the exporter), in any order.
 */
#include <stddef.h>

#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_linear_bwd_in_s8_s16_ref.h"
#include "mt_m0.h"

/*
 * Inputs [0, in_features & ~3) of one sample: the sum over t < n of e[t] * weight[t, i], four inputs
 * per mt_m0_col4_run; as mt_linear_bwd_in_s8_s16_ref otherwise. Returns the first input it left
 * to the reference body. n >= 1.
 */
static int32_t bwd_in4(int32_t n,
                       const int16_t *e,
                       const int8_t *weight,
                       int32_t in_features,
                       int32_t multiplier,
                       int32_t shift,
                       int8_t *e_x,
                       int32_t *acc_min,
                       int32_t *acc_max)
{
    const int32_t i_end = in_features & ~3;
    mt_m0_col4 col;
    int32_t i, k;
    col.e_end = e + n;
    col.neg_bytes = -2 * n;
    col.wstride = in_features;
    for (i = 0; i < i_end; i += 4) {
        col.w = weight + i;
        col.acc[0] = col.acc[1] = col.acc[2] = col.acc[3] = 0;
        mt_m0_col4_run(&col);
        for (k = 0; k < 4; k++) {
            const int32_t v = col.acc[k];
            *acc_min = v < *acc_min ? v : *acc_min;
            *acc_max = v > *acc_max ? v : *acc_max;
            if (e_x) {
                e_x[i + k] = mt_m0_requantize_single(v, multiplier, shift, 0, -127, 127);
            }
        }
    }
    return i_end;
}

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
                                  int32_t *acc_max)
{
    int32_t b;
    if (!e16 || !weight || !acc_min || !acc_max || batch < 1) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        const int16_t *e = e16 + b * out_features;
        int8_t *ex = e_x ? e_x + b * in_features : NULL;
        int32_t i0;
        if (channels) {
            mt_linear_bwd_in_s8_s16_ref(channels, channels, n_channels, e, weight, 0, in_features, multiplier, shift,
                                        ex, acc_min, acc_max);
            continue;
        }
        i0 = out_features > 0 ? bwd_in4(out_features, e, weight, in_features, multiplier, shift, ex, acc_min, acc_max)
                              : 0;
        mt_linear_bwd_in_s8_s16_ref(NULL, NULL, out_features, e, weight, i0, in_features, multiplier, shift,
                                    ex, acc_min, acc_max);
    }
    return MT_OK;
}

mt_status mt_linear_bwd_in_s8_s16_keep(const int32_t *keep,
                                       int32_t n_keep,
                                       const int16_t *e16,
                                       const int8_t *weight,
                                       int32_t in_features,
                                       int32_t multiplier,
                                       int32_t shift,
                                       int8_t *e_x,
                                       int32_t *acc_min,
                                       int32_t *acc_max)
{
    if (!keep || !e16 || !weight || !acc_min || !acc_max || n_keep < 0) {
        return MT_ERR_ARG;
    }
    mt_linear_bwd_in_s8_s16_ref(keep, NULL, n_keep, e16, weight, 0, in_features, multiplier, shift, e_x, acc_min,
                                acc_max);
    return MT_OK;
}
