/*
 * The reference body of mt_relu_bwd_s8 (train/fqt/mt_relu_bwd_s8.c), always inline: the
 * reference kernel is this from element 0, and the DSP twin (dsp/mt_relu_bwd_s8.c) runs it for
 * the elements its four-byte blocks leave (and for every element where its fast path does not
 * apply), so both builds share one definition of the result.
 */
#ifndef MT_RELU_BWD_S8_REF_H
#define MT_RELU_BWD_S8_REF_H

#include "mt_arch.h"

/* e_out[i] = e_in[i] where lo < y[i] (and y[i] < hi unless hi > 127), else 0, for from <= i < size. */
MT_INLINE void mt_relu_bwd_s8_ref(int32_t from, int32_t size, int32_t lo, int32_t hi, const int8_t *y,
                                  const int8_t *e_in, int8_t *e_out)
{
    int32_t i;
    for (i = from; i < size; ++i) {
        const int32_t keep = y[i] > lo && (hi > 127 || y[i] < hi);
        e_out[i] = keep ? e_in[i] : 0;
    }
}

#endif /* MT_RELU_BWD_S8_REF_H */
