/*
 * The argument check and the reference body of mt_linear_fwd_s8 (nn/mt_linear_fwd_s8.c), always
 * inline: the reference kernel is this, and the DSP twin (dsp/mt_linear_fwd_s8.c) runs it where
 * its fast path does not apply (no scratch, or a core without DSP), so both builds share one
 * definition of the result. mt_linear_fwd_s8_rows4 shares the check.
 */
#ifndef MT_LINEAR_FWD_S8_REF_H
#define MT_LINEAR_FWD_S8_REF_H

#include "mt_arch.h"
#include "mt_fixedpoint.h"
#include "mt_nn.h"

/* MT_ERR_ARG unless the arguments of mt_linear_fwd_s8 (or mt_linear_fwd_s8_rows4) are valid. */
MT_INLINE mt_status mt_linear_fwd_s8_check(const mt_linear_params *params,
                                           const mt_per_channel_quant *quant,
                                           int32_t batch,
                                           const int8_t *input,
                                           int32_t in_features,
                                           const int8_t *weight,
                                           const int32_t *bias,
                                           int32_t out_features,
                                           const int8_t *output)
{
    if (!params || !quant || !quant->multiplier || !quant->shift || !input || !weight || !bias || !output ||
        batch < 1 || in_features < 1 || out_features < 1) {
        return MT_ERR_ARG;
    }
    return MT_OK;
}

/* mt_linear_fwd_s8 with checked arguments: one dot product per output, then mt_requantize. */
MT_INLINE void mt_linear_fwd_s8_ref(const mt_linear_params *params,
                                    const mt_per_channel_quant *quant,
                                    int32_t batch,
                                    const int8_t *input,
                                    int32_t in_features,
                                    const int8_t *weight,
                                    const int32_t *bias,
                                    int32_t out_features,
                                    int8_t *output)
{
    const int32_t zx = params->input_zero_point;
    int32_t n, o, i;
    for (n = 0; n < batch; n++) {
        const int8_t *x = input + n * in_features;
        for (o = 0; o < out_features; o++) {
            const int8_t *w = weight + o * in_features;
            int32_t acc = bias[o];
            /* NOTE: |acc| <= |bias| + 255 * sum|w| < 2^31 (checked at export) */
            MT_UNROLL_DOT
            for (i = 0; i < in_features; i++) {
                acc += ((int32_t)x[i] - zx) * (int32_t)w[i];
            }
            output[n * out_features + o] = mt_requantize(acc, quant->multiplier[o], quant->shift[o],
                                                         params->output_zero_point, params->act_min,
                                                         params->act_max);
        }
    }
}

#endif /* MT_LINEAR_FWD_S8_REF_H */
