/* Per-channel NP coefficients c0 * M_c (docs/integer-semantics.md 12.5; zo_estimator.estimate_np). */
#include "mt_train.h"

mt_status mt_zo_np_coef_f32(float c0, float s_x, const float *s_w, float s_y, int32_t channels, float *coef)
{
    int32_t c;
    if (s_w == NULL || coef == NULL || channels < 1) {
        return MT_ERR_ARG;
    }
    for (c = 0; c < channels; ++c) {
        const float slope = (s_x * s_w[c]) / s_y;
        coef[c] = c0 * slope;
    }
    return MT_OK;
}
