/*
 * The int32 bias of a uint8 layer (seed A) follows its accumulator scale float32(s_x) * s_w (one weight
 * scale per tensor) and takes its update (Python twin: fqt.FQT._rescale_bias, _bias_room with w - z_w).
 */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

mt_status mt_fqt_bias_rescale_u8(int32_t channels,
                                 int32_t per_channel,
                                 const uint8_t *w,
                                 int32_t w_zero_point,
                                 float s_x,
                                 float s_w,
                                 const float *bias_step,
                                 float *acc_scale,
                                 int32_t *bias)
{
    const float s_new = s_x * s_w;
    int32_t c, k, k0;
    if (!w || !acc_scale || !bias || channels < 1) {
        return MT_ERR_ARG;
    }
    for (c = 0; c < channels; ++c) {
        int64_t l1 = 0;
        if (s_new == acc_scale[c] && bias_step == NULL) {
            continue;
        }
        for (k0 = 0; k0 < per_channel; k0 += 65536) { /* NOTE: 65536 * 255 < 2^31: int32 within a block */
            const uint8_t *row = w + c * per_channel + k0;
            const int32_t n = per_channel - k0 < 65536 ? per_channel - k0 : 65536;
            int32_t part = 0;
            for (k = 0; k < n; ++k) {
                const int32_t v = (int32_t)row[k] - w_zero_point;
                part += v < 0 ? -v : v;
            }
            l1 += part;
        }
        bias[c] = mt_fqt_rescale_bias_one(bias[c], acc_scale[c], s_new, bias_step ? bias_step[c] : 0.0f, l1);
        acc_scale[c] = s_new;
    }
    return MT_OK;
}
