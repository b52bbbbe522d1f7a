/*
 * mcutrain runtime: mt_qas_upd_s8_f32, the ARMv6-M (Cortex-M0+) twin of
 * train/qas/mt_qas_upd_s8_f32.c, bit-exact with it in every case. Why: without an FPU the
 * reference's per-weight float32 steps (g * k[c], the clamp, round_half_away or floor(. + r), the
 * int cast) are about ten soft-float calls, several times the cost of the weight's gradient.
 * Here g * k[c] is rounded by mt_m0_f32_mul_fast and + r by mt_m0_f32_add_fast (mt_m0_f32.h,
 * the same IEEE roundings), and the integer step is read off the unpacked result: a step of
 * magnitude >= 511 (|value| >= 512) saturates the weight whatever its exact size. Every case those
 * leave (a zero, subnormal, infinite or NaN operand or result) runs the reference's expression, as
 * does every weight on a core with float32 hardware (MT_M0_F32_SOFT 0).
 */
#include "mt_m0_f32.h"
#include "mt_qas_f32_args_ref.h"
#include "mt_train.h"
#include "mt_train_math.h"

/* The exponent from which |value| >= 512 (value = m * 2^(e - 156), m >= 2^29). */
#define UPD_BIG_EXP 136

/* clamp(w - step, -127, 127), the step of the unpacked d by round_half_away or (floor_mode) floor. */
static int8_t apply(int8_t w, const mt_m0_f32 *d, int32_t floor_mode)
{
    int32_t step;
    int32_t v;
    if (d->e == MT_M0_F32_ZERO) {
        step = 0;
    } else if (d->e >= UPD_BIG_EXP) {
        step = d->s != 0u ? -512 : 512;
    } else {
        const int32_t k = 156 - d->e; /* >= 21 */
        if (!floor_mode) {
            step = k >= 32 ? 0 : (int32_t)((d->m + (1u << (k - 1))) >> k);
            step = d->s != 0u ? -step : step;
        } else if (d->s == 0u) {
            step = k >= 32 ? 0 : (int32_t)(d->m >> k);
        } else {
            step = k >= 32 ? -1 : -(int32_t)((d->m + ((1u << k) - 1u)) >> k);
        }
    }
    v = (int32_t)w - step;
    return (int8_t)(v < -127 ? -127 : (v > 127 ? 127 : v));
}

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
        const uint32_t kb = mt_m0_f32_bits(kc);
        for (e = 0; e < per_channel; ++e) {
            const int32_t i = c * per_channel + e;
            const uint32_t g = mt_m0_f32_bits(grad[i]);
            mt_m0_f32 d = {0u, MT_M0_F32_ZERO, 0u};
            /* g = +-0.0 (many: an input at its zero point) times a finite k: +-0.0, step 0 */
            int fast = MT_M0_F32_SOFT &&
                       (((g << 1) == 0u && (kb << 1) < 0xFF000000u) || !mt_m0_f32_mul_fast(&d, g, kb));
            if (round_state == NULL) {
                w[i] = fast ? apply(w[i], &d, 0) : mt_qas_apply_s8(w[i], mt_qas_step_f32(grad[i] * kc));
                continue;
            }
            { /* stochastic: one draw per weight, in index order */
                const uint32_t u = mt_xorshift32_next(round_state) >> 8;
                if (fast && u != 0u) {
                    uint32_t m = u << 6;
                    int32_t ex = 126; /* u * 2^-24 = m * 2^(ex - 156) */
                    while (m < 0x20000000u) {
                        m <<= 1;
                        --ex;
                    }
                    fast = !mt_m0_f32_add_fast(&d, m, ex, 0u);
                }
                if (fast) {
                    w[i] = apply(w[i], &d, 1);
                } else {
                    const float r = (float)(int32_t)u * (1.0f / 16777216.0f);
                    w[i] = mt_qas_apply_s8(w[i], mt_qas_step_sr_f32(grad[i] * kc, r));
                }
            }
        }
    }
    return MT_OK;
}
