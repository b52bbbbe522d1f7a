/*
 * Seed A's uint8 in-place update of one layer (Python twins: fqt.FQT._standardize and
 * fqt.FQT._update_layer, uint8 weights): the gradient row of channel o is
 * g[k] = float32(grad[k] - z_g) * s_g (the summed per-sample uint8 gradients of batch 1) and
 * g[K] = float32(grad_bias) * gb_scale; standardization as in mt_fqt_upd_s8; then
 * new = float32(w - z_w) * s_w - lr * g_hat over the whole tensor, the tensor's range EMA moves
 * (lo <- (1 - a_w) lo + a_w min(new), likewise hi), its uint8 qparams follow, and
 * w = clamp(round_half_away(new / s_w'), -z_w', 255 - z_w') + z_w' (rounding to nearest).
 * Two passes over the tensor (the range of all new weights comes before the first requantization);
 * the statistics of a channel are updated in the first.
 */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

/* Rows longer than this many weights table their steps per gradient code (256 codes to compute). */
#define MT_UPD_U8_STEP_TABLE_ABOVE 512

/* step[v] = lr * ((g_real[v] - mu) / den): the update's step of gradient code v in one channel. */
MT_INLINE void mt_upd_u8_steps(const float *g_real, float mu, float den, float lr, float *step)
{
    int32_t v;
    for (v = 0; v < 256; ++v) {
        step[v] = lr * ((g_real[v] - mu) / den);
    }
}

mt_status mt_fqt_upd_u8(const mt_fqt_upd_params *p,
                        int32_t channels,
                        int32_t per_channel,
                        const uint8_t *grad,
                        int32_t grad_zero_point,
                        const int32_t *grad_bias,
                        float *norm_mu,
                        float *norm_sd,
                        int8_t *norm_init,
                        uint8_t *w,
                        float *s_w,
                        int32_t *w_zero_point,
                        float *w_lo,
                        float *w_hi,
                        float *bias_step)
{
    const float kk = (float)(per_channel + 1);
    const float an = p ? p->alpha_norm : 0.0f;
    const float keep_n = 1.0f - an;
    /* NOTE: the real value of each uint8 gradient and weight code, float32(v - z) * s as the
       definition computes it per element, tabled once per call: 2 KB of stack for 256 codes each */
    float g_real[256];
    float w_real[256];
    uint8_t still[256]; /* the new code of each old one in a channel with sd == 0 */
    int have_still = 0;
    float lo = 0.0f, hi = 0.0f, s_new, step0;
    int32_t o, k, v, z_new;
    if (!p || !grad || !grad_bias || !norm_mu || !norm_sd || !norm_init || !w || !s_w || !w_zero_point ||
        !w_lo || !w_hi || !bias_step || channels < 1 || per_channel < 1) {
        return MT_ERR_ARG;
    }
    for (v = 0; v < 256; ++v) {
        g_real[v] = (float)(v - grad_zero_point) * p->g_scale;
        w_real[v] = (float)(v - *w_zero_point) * *s_w;
    }
    step0 = p->lr * 0.0f; /* lr * g_hat where g_hat is 0 (sd == 0) */
    for (o = 0; o < channels; ++o) { /* pass 1: statistics and the range of the new weights */
        const uint8_t *g = grad + o * per_channel;
        const uint8_t *wr = w + o * per_channel;
        const float gb = mt_s64_to_f32(grad_bias[o]) * p->gb_scale;
        float sum = 0.0f, var = 0.0f, mu_b, sd_b, mu, sd, den;
        for (k = 0; k < per_channel; ++k) {
            sum += g_real[g[k]];
        }
        sum += gb;
        mu_b = sum / kk;
        for (k = 0; k < per_channel; ++k) {
            const float d = g_real[g[k]] - mu_b;
            var += d * d;
        }
        var += (gb - mu_b) * (gb - mu_b);
        sd_b = mt_sqrt_f32(var / kk);
        mu = norm_init[o] ? keep_n * norm_mu[o] + an * mu_b : mu_b;
        sd = norm_init[o] ? keep_n * norm_sd[o] + an * sd_b : sd_b;
        norm_mu[o] = mu;
        norm_sd[o] = sd;
        norm_init[o] = 1;
        den = sd + 1e-12f;
        if (o == 0) {
            lo = hi = sd == 0.0f ? w_real[wr[0]] - step0 : w_real[wr[0]] - p->lr * ((g_real[g[0]] - mu) / den);
        }
        if (sd == 0.0f) { /* new = w_real[code] - step0 rises with the code (s_w > 0): its extremes */
            int32_t c_lo = wr[0], c_hi = wr[0];
            for (k = 1; k < per_channel; ++k) {
                c_lo = wr[k] < c_lo ? wr[k] : c_lo;
                c_hi = wr[k] > c_hi ? wr[k] : c_hi;
            }
            lo = w_real[c_lo] - step0 < lo ? w_real[c_lo] - step0 : lo;
            hi = w_real[c_hi] - step0 > hi ? w_real[c_hi] - step0 : hi;
        } else if (per_channel > MT_UPD_U8_STEP_TABLE_ABOVE) {
            float step[256]; /* lr * g_hat of each gradient code: the same float32 steps, once per code */
            mt_upd_u8_steps(g_real, mu, den, p->lr, step);
            for (k = 0; k < per_channel; ++k) {
                const float nw = w_real[wr[k]] - step[g[k]];
                lo = nw < lo ? nw : lo;
                hi = nw > hi ? nw : hi;
            }
        } else {
            const float lr = p->lr;
            for (k = 0; k < per_channel; ++k) {
                const float nw = w_real[wr[k]] - lr * ((g_real[g[k]] - mu) / den);
                lo = nw < lo ? nw : lo;
                hi = nw > hi ? nw : hi;
            }
        }
        bias_step[o] = sd == 0.0f ? 0.0f : p->lr * ((gb - mu) / den);
    }
    {
        const float keep_w = 1.0f - p->alpha_w;
        *w_lo = keep_w * *w_lo + p->alpha_w * lo;
        *w_hi = keep_w * *w_hi + p->alpha_w * hi;
    }
    mt_fqt_qparams_u8(*w_lo, *w_hi, &s_new, &z_new);
    for (o = 0; o < channels; ++o) { /* pass 2: requantize with the new qparams */
        const uint8_t *g = grad + o * per_channel;
        uint8_t *wr = w + o * per_channel;
        const float mu = norm_mu[o], sd = norm_sd[o], den = sd + 1e-12f;
        const float lr = p->lr, s_q = s_new; /* locals: the byte stores below may alias *p */
        const int32_t z_q = z_new;
        if (sd == 0.0f) { /* every weight's new code is a function of its old code: tabled once */
            if (!have_still) {
                for (v = 0; v < 256; ++v) {
                    still[v] = mt_round_clamp_u8((w_real[v] - step0) / s_q, z_q);
                }
                have_still = 1;
            }
            for (k = 0; k < per_channel; ++k) {
                wr[k] = still[wr[k]];
            }
            continue;
        }
        if (per_channel > MT_UPD_U8_STEP_TABLE_ABOVE) {
            float step[256];
            mt_upd_u8_steps(g_real, mu, den, lr, step);
            for (k = 0; k < per_channel; ++k) {
                wr[k] = mt_round_clamp_u8((w_real[wr[k]] - step[g[k]]) / s_q, z_q);
            }
            continue;
        }
        for (k = 0; k < per_channel; ++k) {
            const float nw = w_real[wr[k]] - lr * ((g_real[g[k]] - mu) / den);
            wr[k] = mt_round_clamp_u8(nw / s_q, z_q);
        }
    }
    *s_w = s_new;
    *w_zero_point = z_new;
    return MT_OK;
}
