/*
 * Seed A's uint8 in-place update of one layer from a gradient in any stored format, with partial
 * updates (Python twins: fqt.FQT._standardize and fqt.FQT._update_layer, uint8 weights). Per
 * updated channel o: g[k] = the real gradient (mt_fqt_grad_at), g[K] = the real bias gradient,
 *   mu_b = (sum_k g[k]) / (K + 1), var_b = (sum_k (g[k] - mu_b)^2) / (K + 1) (sums from +0.0 in k
 *   order, the bias last), sd_b = sqrt(var_b); mu, sd their EMAs (mt_fqt_norm_ema);
 *   g_hat = (g - mu) / (sd + 1e-12), 0 when sd == 0 or for a channel not updated.
 * Then over the whole tensor new = float32(w - z_w) * s_w - lr * g_hat, the range EMA moves with
 * (min new, max new), the new uint8 qparams follow, and
 * w = clamp(round_half_away(new / s_w'), -z_w', 255 - z_w') + z_w'. Two passes (the range of every
 * new weight is needed before the first requantization).
 */
#include "mt_fqt.h"
#include "mt_fqt_grad.h"
#include "mt_fqt_math.h"

/* g_hat of element k of channel o (0 for channels not updated or with sd == 0). */
MT_INLINE float ghat_at(const mt_fqt_grad *g, int32_t idx, int upd_o, float mu, float sd)
{
    if (!upd_o || sd == 0.0f) {
        return 0.0f;
    }
    return (mt_fqt_grad_at(g, idx) - mu) / (sd + 1e-12f);
}

mt_status mt_fqt_upd_u8_any(const mt_fqt_upd_params *p,
                            int32_t channels,
                            int32_t per_channel,
                            const mt_fqt_grad *grad,
                            const mt_fqt_grad *grad_bias,
                            const uint8_t *upd,
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
    float lo = 0.0f, hi = 0.0f, s_new;
    int32_t o, k, z_new;
    if (!p || !mt_fqt_grad_ok(grad) || !mt_fqt_grad_ok(grad_bias) || !norm_mu || !norm_sd || !norm_init || !w ||
        !s_w || !w_zero_point || !w_lo || !w_hi || !bias_step || channels < 1 || per_channel < 1) {
        return MT_ERR_ARG;
    }
    for (o = 0; o < channels; ++o) { /* pass 1: statistics and the range of the new weights */
        const int up = upd == NULL || upd[o] != 0;
        const int32_t base = o * per_channel;
        const uint8_t *wr = w + base;
        float mu = norm_mu[o], sd = norm_sd[o];
        if (up) {
            const float gb = mt_fqt_grad_at(grad_bias, o);
            float sum = 0.0f, var = 0.0f, mu_b;
            for (k = 0; k < per_channel; ++k) {
                sum += mt_fqt_grad_at(grad, base + k);
            }
            sum += gb;
            mu_b = sum / kk;
            for (k = 0; k < per_channel; ++k) {
                const float d = mt_fqt_grad_at(grad, base + k) - mu_b;
                var += d * d;
            }
            var += (gb - mu_b) * (gb - mu_b);
            sd = mt_fqt_norm_ema(mu_b, mt_sqrt_f32(var / kk), p->alpha_norm, &norm_mu[o], &norm_sd[o],
                                 &norm_init[o]);
            mu = norm_mu[o];
            bias_step[o] = sd == 0.0f ? 0.0f : p->lr * ((gb - mu) / (sd + 1e-12f));
        } else {
            bias_step[o] = 0.0f;
        }
        for (k = 0; k < per_channel; ++k) {
            const float nw = (float)((int32_t)wr[k] - *w_zero_point) * *s_w - p->lr * ghat_at(grad, base + k, up, mu, sd);
            if ((o == 0 && k == 0) || nw < lo) {
                lo = nw;
            }
            if ((o == 0 && k == 0) || nw > hi) {
                hi = nw;
            }
        }
    }
    {
        const float keep_w = 1.0f - p->alpha_w;
        *w_lo = keep_w * *w_lo + p->alpha_w * lo;
        *w_hi = keep_w * *w_hi + p->alpha_w * hi;
    }
    mt_fqt_qparams_u8(*w_lo, *w_hi, &s_new, &z_new);
    for (o = 0; o < channels; ++o) { /* pass 2: requantize with the new qparams */
        const int up = upd == NULL || upd[o] != 0;
        const int32_t base = o * per_channel;
        uint8_t *wr = w + base;
        const float mu = norm_mu[o], sd = norm_sd[o];
        const float vlo = (float)(0 - z_new), vhi = (float)(255 - z_new);
        for (k = 0; k < per_channel; ++k) {
            const float nw = (float)((int32_t)wr[k] - *w_zero_point) * *s_w - p->lr * ghat_at(grad, base + k, up, mu, sd);
            float v = mt_round_half_away_inline_f32(nw / s_new);
            v = v < vlo ? vlo : (v > vhi ? vhi : v);
            wr[k] = (uint8_t)((int32_t)v + z_new);
        }
    }
    *s_w = s_new;
    *w_zero_point = z_new;
    return MT_OK;
}
