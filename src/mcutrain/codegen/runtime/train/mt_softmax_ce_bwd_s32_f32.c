/* Logit error of BP-QAS from the Q24 loss error (docs/integer-semantics.md 12.6; bp_qas.gradients). */
#include "mt_train.h"
#include "mt_train_math.h"

mt_status mt_softmax_ce_bwd_s32_f32(int32_t batch, int32_t classes, const int32_t *err, float scale, float *e)
{
    int64_t i;
    float c;
    if (err == NULL || e == NULL || batch < 1 || classes < 1) {
        return MT_ERR_ARG;
    }
    c = (float)((1.0 / 16777216.0) / (double)batch); /* float64 2^-24 / B, rounded once */
    for (i = 0; i < (int64_t)batch * classes; ++i) {
        const float t = mt_s64_to_f32(err[i]) * c;
        e[i] = t * scale;
    }
    return MT_OK;
}
