/*
 * The int32 bias of a uint8 layer with partial updates (Python twin: fqt.FQT._rescale_bias): a
 * channel moves to the new accumulator scale float32(s_x) * s_w when that scale changed or when the
 * channel was updated (then with its step); others keep their integer bias.
 */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

mt_status mt_fqt_bias_rescale_u8_upd(int32_t channels,
                                     int32_t per_channel,
                                     const uint8_t *w,
                                     int32_t w_zero_point,
                                     float s_x,
                                     float s_w,
                                     const float *bias_step,
                                     const uint8_t *upd,
                                     float *acc_scale,
                                     int32_t *bias)
{
    const float s_new = s_x * s_w;
    int32_t c, k;
    if (!w || !acc_scale || !bias || channels < 1 || (bias_step == NULL) != (upd == NULL)) {
        return MT_ERR_ARG;
    }
    for (c = 0; c < channels; ++c) {
        int64_t l1 = 0;
        const int moved = upd != NULL && upd[c] != 0;
        if (s_new == acc_scale[c] && !moved) {
            continue;
        }
        for (k = 0; k < per_channel; ++k) {
            const int32_t v = (int32_t)w[c * per_channel + k] - w_zero_point;
            l1 += v < 0 ? -v : v;
        }
        bias[c] = mt_fqt_rescale_bias_one(bias[c], acc_scale[c], s_new, moved ? bias_step[c] : 0.0f, l1);
        acc_scale[c] = s_new;
    }
    return MT_OK;
}
