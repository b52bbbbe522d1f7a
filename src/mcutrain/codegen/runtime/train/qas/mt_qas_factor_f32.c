/* QAS update factors (docs/integer-semantics.md 12.5; Python twin methods/qas.py update_factor). */
#include "mt_train.h"

mt_status mt_qas_factor_f32(float lr, int32_t channels, const float *coef, const float *scale, float *k)
{
    int32_t c;
    if (coef == NULL || k == NULL || channels < 1) {
        return MT_ERR_ARG;
    }
    for (c = 0; c < channels; ++c) {
        const float lc = lr * coef[c];
        k[c] = scale == NULL ? lc : lc / (scale[c] * scale[c]);
    }
    return MT_OK;
}
