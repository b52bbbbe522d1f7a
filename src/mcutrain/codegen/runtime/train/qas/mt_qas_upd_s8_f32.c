/*
 * QAS update of int8 weights from float32 gradients (BP-QAS), in place (docs/integer-semantics.md 12.5-12.6;
 * Python twin methods/qas.py): w = clamp(w - round_half_away(clamp(g * k[c], +-2^30)), -127, 127);
 * with round_state != NULL, stochastic rounding: floor(clamp(g * k[c]) + r), r one uniform01 draw
 * per weight in index order.
 */
#include "mt_qas_f32_args_ref.h"
#include "mt_train.h"
#include "mt_train_math.h"

mt_status mt_qas_upd_s8_f32(int32_t channels,
                            int32_t per_channel,
                            const float *grad,
                            const float *k,
                            uint32_t *round_state,
                            int8_t *w)
{
    int32_t c;
    int32_t e;
    if (mt_qas_upd_s8_f32_args(channels, per_channel, grad, k, w) != MT_OK) {
        return MT_ERR_ARG;
    }
    for (c = 0; c < channels; ++c) {
        const float kc = k[c];
        if (round_state == NULL) {
            for (e = 0; e < per_channel; ++e) {
                const int64_t i = (int64_t)c * per_channel + e;
                w[i] = mt_qas_apply_s8(w[i], mt_qas_step_f32(grad[i] * kc));
            }
            continue;
        }
        for (e = 0; e < per_channel; ++e) { /* stochastic: one draw per weight, in index order */
            const int64_t i = (int64_t)c * per_channel + e;
            const float r = mt_xorshift32_uniform01(round_state);
            w[i] = mt_qas_apply_s8(w[i], mt_qas_step_sr_f32(grad[i] * kc, r));
        }
    }
    return MT_OK;
}
