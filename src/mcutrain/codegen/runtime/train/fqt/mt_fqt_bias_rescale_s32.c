/*
 * The int32 bias of an FQT int8 layer follows its accumulator scale float32(s_x) * s_w[c] as the
 * ranges move, and takes its update (Python twin: fqt.FQT._rescale_bias and fqt.FQT._bias_room).
 */
#include "mt_fqt.h"
#include "mt_fqt_math.h"
#include "mt_train_dsp.h"

mt_status mt_fqt_bias_rescale_s32(int32_t channels,
                                  int32_t per_channel,
                                  const int8_t *w,
                                  float s_x,
                                  const float *s_w,
                                  const float *bias_step,
                                  const uint8_t *upd,
                                  float *acc_scale,
                                  int32_t *bias)
{
    int32_t c, k;
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
#if MT_DSP
        l1 = mt_l1_s8(w + c * per_channel, per_channel); /* four |w| per USADA8 */
        (void)k;
#else  /* !MT_DSP */
        for (k = 0; k < per_channel; ++k) {
            const int32_t v = w[c * per_channel + k];
            l1 += v < 0 ? -v : v;
        }
#endif /* MT_DSP */
        bias[c] = mt_fqt_rescale_bias_one(bias[c], acc_scale[c], s_new, updated ? bias_step[c] : 0.0f, l1);
        acc_scale[c] = s_new;
    }
    return MT_OK;
}
