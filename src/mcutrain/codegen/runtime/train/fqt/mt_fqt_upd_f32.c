/*
 * The FQT float32 update of one layer (Python twins: fqt.FQT._standardize and the float32 branch of
 * fqt.FQT._update_layer). Per updated channel o, g[k] = grad[k] * g_scale and g[K] =
 * grad_bias[o] * gb_scale; mu_b, var_b, sd_b and their EMAs as in mt_fqt_upd_s8; then
 * w[k] = w[k] - lr * g_hat[k] and b = b - lr * g_hat_b with g_hat = (g - mu) / (sd + 1e-12), 0
 * when sd == 0. Channels with upd[o] == 0 are left as they are.
 */
#include "mt_fqt.h"
#include "mt_fqt_grad.h"
#include "mt_fqt_math.h"

mt_status mt_fqt_upd_f32(const mt_fqt_upd_params *p,
                         int32_t channels,
                         int32_t per_channel,
                         const float *grad,
                         const float *grad_bias,
                         const uint8_t *upd,
                         float *norm_mu,
                         float *norm_sd,
                         int8_t *norm_init,
                         float *w,
                         float *bias)
{
    const float kk = (float)(per_channel + 1);
    int32_t o, k;
    if (!p || !grad || !grad_bias || !norm_mu || !norm_sd || !norm_init || !w || !bias || channels < 1 ||
        per_channel < 1) {
        return MT_ERR_ARG;
    }
    for (o = 0; o < channels; ++o) {
        const float *g = grad + o * per_channel;
        float *wr = w + o * per_channel;
        const float gb = grad_bias[o] * p->gb_scale;
        float sum = 0.0f, var = 0.0f, mu_b, sd, mu, den;
        if (upd && !upd[o]) {
            continue;
        }
        for (k = 0; k < per_channel; ++k) {
            sum += g[k] * p->g_scale;
        }
        sum += gb;
        mu_b = sum / kk;
        for (k = 0; k < per_channel; ++k) {
            const float d = g[k] * p->g_scale - mu_b;
            var += d * d;
        }
        var += (gb - mu_b) * (gb - mu_b);
        sd = mt_fqt_norm_ema(mu_b, mt_sqrt_f32(var / kk), p->alpha_norm, &norm_mu[o], &norm_sd[o], &norm_init[o]);
        mu = norm_mu[o];
        den = sd + 1e-12f;
        for (k = 0; k < per_channel; ++k) {
            const float gh = sd == 0.0f ? 0.0f : (g[k] * p->g_scale - mu) / den;
            wr[k] = wr[k] - p->lr * gh;
        }
        bias[o] = bias[o] - p->lr * (sd == 0.0f ? 0.0f : (gb - mu) / den);
    }
    return MT_OK;
}
