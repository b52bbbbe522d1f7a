/*
 * QAS update of int8 weights from int64 gradient sums (ZO), in place (docs/integer-semantics.md 12.5-12.6;
 * Python twin methods/qas.py, methods/step_limit.py): w = clamp(w - limit(round_half_away(clamp(g * k[c],
 * +-2^30)), +-max_step), -127, 127); with round_state != NULL, stochastic rounding instead of the
 * nearest: floor(clamp(g * k[c]) + r), r one uniform01 draw per weight in index order.
 */
#include "mt_train.h"
#include "mt_train_math.h"

mt_status mt_qas_upd_s8_s64(int32_t channels,
                            int32_t per_channel,
                            const int64_t *grad,
                            const float *k,
                            uint32_t *round_state,
                            int32_t max_step,
                            int8_t *w)
{
    int32_t c;
    int32_t e;
    if (grad == NULL || k == NULL || w == NULL || channels < 1 || per_channel < 1 || max_step < 1) {
        return MT_ERR_ARG;
    }
    for (c = 0; c < channels; ++c) {
        const float kc = k[c];
        if (round_state == NULL) {
            for (e = 0; e < per_channel; ++e) {
                const int64_t i = (int64_t)c * per_channel + e;
                const int32_t step = mt_qas_step_f32(mt_s64_to_f32(grad[i]) * kc);
                w[i] = mt_qas_apply_s8(w[i], mt_qas_step_limit_s32(step, max_step));
            }
            continue;
        }
        for (e = 0; e < per_channel; ++e) { /* stochastic: one draw per weight, in index order */
            const int64_t i = (int64_t)c * per_channel + e;
            const float r = mt_xorshift32_uniform01(round_state);
            const int32_t step = mt_qas_step_sr_f32(mt_s64_to_f32(grad[i]) * kc, r);
            w[i] = mt_qas_apply_s8(w[i], mt_qas_step_limit_s32(step, max_step));
        }
    }
    return MT_OK;
}
