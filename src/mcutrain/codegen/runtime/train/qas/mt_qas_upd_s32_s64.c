/*
 * QAS update of int32 biases from int64 gradient sums (ZO), in place (docs/integer-semantics.md 12.5-12.6;
 * Python twin methods/qas.py): b = sat32(b - round_half_away(clamp(g * k[c], +-2^30))).
 */
#include "mt_train.h"
#include "mt_train_math.h"

mt_status mt_qas_upd_s32_s64(int32_t channels, const int64_t *grad, const float *k, int32_t *b)
{
    int32_t i;
    if (grad == NULL || k == NULL || b == NULL || channels < 1) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < channels; ++i) {
        b[i] = mt_qas_apply_s32(b[i], mt_qas_step_f32(mt_s64_to_f32(grad[i]) * k[i]));
    }
    return MT_OK;
}
