/*
 * The layout and reference body of mt_linear_fwd_s8_rows4 (nn/mt_linear_fwd_s8_rows4.c), always
 * inline: the reference kernel is this, and the DSP twin (dsp/mt_linear_fwd_s8_rows4.c) runs it
 * where its fast path does not apply (no scratch, unaligned weights, or a core without DSP), so
 * both builds share one definition of the layout and the result.
 */
#ifndef MT_LINEAR_FWD_S8_ROWS4_REF_H
#define MT_LINEAR_FWD_S8_ROWS4_REF_H

#include "mt_fixedpoint.h"
#include "mt_nn.h"

/* in_features rounded up to a multiple of four. */
MT_INLINE int32_t mt_rows4_padded(int32_t in_features)
{
    return (in_features + 3) & ~3;
}

/* Index of weight (o, i) in the rows4 layout (mt_nn.h). */
MT_INLINE int32_t mt_rows4_index(int32_t o, int32_t i, int32_t in_features, int32_t out_features)
{
    const int32_t i4 = mt_rows4_padded(in_features);
    if (o < (out_features & ~3)) {
        return (o & ~3) * i4 + (i >> 2) * 16 + (o & 3) * 4 + (i & 3);
    }
    return o * i4 + i;
}

/* mt_linear_fwd_s8_rows4 with checked arguments: one dot product per output, reading the
   interleaved layout. */
MT_INLINE void mt_linear_fwd_s8_rows4_ref(const mt_linear_params *params,
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
            int32_t acc = bias[o];
            /* NOTE: |acc| <= |bias| + 255 * sum|w| < 2^31 (checked at export) */
            for (i = 0; i < in_features; i++) {
                acc += ((int32_t)x[i] - zx) * (int32_t)weight[mt_rows4_index(o, i, in_features, out_features)];
            }
            output[n * out_features + o] = mt_requantize(acc, quant->multiplier[o], quant->shift[o],
                                                         params->output_zero_point, params->act_min,
                                                         params->act_max);
        }
    }
}

#endif /* MT_LINEAR_FWD_S8_ROWS4_REF_H */
