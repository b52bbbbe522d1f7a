/*
 * The body of mt_fqt_bias_rescale_s32, always inline, shared by the reference
 * (train/fqt/mt_fqt_bias_rescale_s32.c) and its DSP twin (dsp/mt_fqt_bias_rescale_s32.c): they
 * differ only in how a weight row's sum |w| is taken, which each passes in as a constant `l1_of`
 * (inlined), so both builds share one definition of which channels rescale and how.
 */
#ifndef MT_FQT_BIAS_RESCALE_S32_REF_H
#define MT_FQT_BIAS_RESCALE_S32_REF_H

#include "mt_fqt.h"
#include "mt_fqt_math.h"

/* sum |w[k]| of n int8 values, one at a time: the reference `l1_of`. */
MT_INLINE int64_t mt_fqt_l1_s8_ref(const int8_t *w, int32_t n)
{
    int64_t l1 = 0;
    int32_t k;
    for (k = 0; k < n; ++k) {
        const int32_t v = w[k];
        l1 += v < 0 ? -v : v;
    }
    return l1;
}

/* mt_fqt_bias_rescale_s32 (mt_fqt.h) with `l1_of(row, per_channel)` the sum |w| of a weight row. */
MT_INLINE mt_status mt_fqt_bias_rescale_s32_with(int32_t channels,
                                                 int32_t per_channel,
                                                 const int8_t *w,
                                                 float s_x,
                                                 const float *s_w,
                                                 const float *bias_step,
                                                 const uint8_t *upd,
                                                 float *acc_scale,
                                                 int32_t *bias,
                                                 int64_t (*l1_of)(const int8_t *, int32_t))
{
    int32_t c;
    if (!w || !s_w || !acc_scale || !bias || channels < 1) {
        return MT_ERR_ARG;
    }
    for (c = 0; c < channels; ++c) {
        const float s_new = s_x * s_w[c];
        const int32_t updated = bias_step != NULL && (upd == NULL || upd[c]);
        int64_t l1 = 0;
        if (s_new == acc_scale[c] && !updated) {
            continue;
        }
        l1 = l1_of(w + c * per_channel, per_channel);
        bias[c] = mt_fqt_rescale_bias_one(bias[c], acc_scale[c], s_new, updated ? bias_step[c] : 0.0f, l1);
        acc_scale[c] = s_new;
    }
    return MT_OK;
}

#endif /* MT_FQT_BIAS_RESCALE_S32_REF_H */
