/* The int32 bias scale s_x * s_w[c] (methods/qas.py bias_scale). */
#include "mt_train.h"

mt_status mt_qas_bias_scale_f32(float s_x, const float *s_w, int32_t channels, float *out)
{
    int32_t c;
    if (s_w == NULL || out == NULL || channels < 1) {
        return MT_ERR_ARG;
    }
    for (c = 0; c < channels; ++c) {
        out[c] = s_x * s_w[c];
    }
    return MT_OK;
}
