/*
 * Linear error propagation of prescaled int16 errors (Python twin: fqt_kernels.linear_bwd_in_acc
 * in mode "int" and fqt.FQT._to_err). NOTE: |acc| <= 32512 * 127 * O < 2^31 for O <= 520 (checked
 * by the exporter).
 * mt_linear_bwd_in_s8_s16_keep (partial updates) runs the same loops over the kept rows: its errors
 * come compacted from mt_fqt_prescale_s16_keep (e16[t] is row keep[t]'s); the pruned terms are 0.
 * Reference kernels (mt_linear_bwd_in_s8_s16_ref.h); dsp/mt_linear_bwd_in_s8_s16.c is their DSP twin.
 */
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_linear_bwd_in_s8_s16_ref.h"

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
        if (channels) {
            mt_linear_bwd_in_s8_s16_ref(channels, channels, n_channels, e, weight, 0, in_features, multiplier, shift,
                                        ex, acc_min, acc_max);
            continue;
        }
        mt_linear_bwd_in_s8_s16_ref(NULL, NULL, out_features, e, weight, 0, in_features, multiplier, shift, ex, acc_min,
                                    acc_max);
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
