/*
 * The reference body of mt_linear_bwd_in_s8_s16 and _keep (train/fqt/mt_linear_bwd_in_s8_s16.c),
 * always inline: the reference kernels are this from input 0, and the DSP twin
 * (dsp/mt_linear_bwd_in_s8_s16.c) runs it for the inputs its four-column blocks leave (every input
 * on a core without DSP, and the listed-channel form), so both builds share one definition of the
 * result. NOTE: |acc| <= 32512 * 127 * O < 2^31 for O <= 520 (checked by the exporter).
 */
#ifndef MT_LINEAR_BWD_IN_S8_S16_REF_H
#define MT_LINEAR_BWD_IN_S8_S16_REF_H

#include "mt_fixedpoint.h"
#include "mt_fqt.h"

/*
 * The reference loop over inputs [i0, in_features) of one sample: the sum over t < n of
 * e[cols[t]] * weight[rows[t], i] (cols NULL: t; rows NULL: the column). e int16 (in) errors of
 * the sample, weight [out_features, in_features] int8 (in), e_x [in_features] int8 (out; NULL: only
 * the range), acc_min/acc_max int32 (in/out) widen to every accumulator.
 */
MT_INLINE void mt_linear_bwd_in_s8_s16_ref(const int32_t *rows,
                                           const int32_t *cols,
                                           int32_t n,
                                           const int16_t *e,
                                           const int8_t *weight,
                                           int32_t i0,
                                           int32_t in_features,
                                           int32_t multiplier,
                                           int32_t shift,
                                           int8_t *e_x,
                                           int32_t *acc_min,
                                           int32_t *acc_max)
{
    int32_t i, t;
    for (i = i0; i < in_features; ++i) {
        int32_t acc = 0;
        for (t = 0; t < n; ++t) {
            const int32_t col = cols ? cols[t] : t;
            acc += (int32_t)e[col] * weight[(rows ? rows[t] : col) * in_features + i];
        }
        *acc_min = acc < *acc_min ? acc : *acc_min;
        *acc_max = acc > *acc_max ? acc : *acc_max;
        if (e_x) {
            e_x[i] = mt_requantize_single(acc, multiplier, shift, 0, -127, 127);
        }
    }
}

#endif /* MT_LINEAR_BWD_IN_S8_S16_REF_H */
