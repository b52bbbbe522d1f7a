/*
 * The reference body of mt_linear_fwd_s8_range (train/fqt/mt_linear_fwd_s8_range.c), one output
 * at a time, always inline: the reference kernel runs it for every output, and the DSP twin
 * (dsp/mt_linear_fwd_s8_range.c) for the outputs its row pairs leave (every output on a core
 * without DSP), so both builds share one definition of the result. One output, not the row loop:
 * with the loop inside, the DSP twin's registers came out differently (+28 instructions a step).
 */
#ifndef MT_LINEAR_FWD_S8_RANGE_REF_H
#define MT_LINEAR_FWD_S8_RANGE_REF_H

#include "mt_fixedpoint.h"
#include "mt_fqt.h"

/*
 * Output o of sample b: zx = params->input_zero_point, x [in_features] int8 (in), weight
 * [out_features, in_features] int8 (in), bias [out_features] int32 (in), output [batch,
 * out_features] int8 (out: element [b, o]); acc_min/acc_max [out_features] int32 (in/out): element
 * o widens to the accumulator.
 * NOTE: the int32 bound as in the conv kernel (checked by the exporter).
 */
MT_INLINE void mt_linear_fwd_s8_range_ref(const mt_linear_params *params,
                                          const mt_per_channel_quant *quant,
                                          int32_t zx,
                                          const int8_t *x,
                                          int32_t in_features,
                                          const int8_t *weight,
                                          const int32_t *bias,
                                          int32_t o,
                                          int32_t out_features,
                                          int32_t b,
                                          int8_t *output,
                                          int32_t *acc_min,
                                          int32_t *acc_max)
{
    const int8_t *w = weight + o * in_features;
    int32_t acc = bias[o];
    int32_t i;
    for (i = 0; i < in_features; ++i) {
        acc += ((int32_t)x[i] - zx) * w[i];
    }
    acc_min[o] = acc < acc_min[o] ? acc : acc_min[o];
    acc_max[o] = acc > acc_max[o] ? acc : acc_max[o];
    output[b * out_features + o] = mt_requantize(acc, quant->multiplier[o], quant->shift[o], params->output_zero_point,
                                                 params->act_min, params->act_max);
}

#endif /* MT_LINEAR_FWD_S8_RANGE_REF_H */
