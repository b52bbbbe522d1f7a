/*
 * The FQT int8 in-place update of one layer (Python twins: fqt.FQT._standardize and
 * fqt.FQT._update_layer, int8 weights, stochastic rounding). Per channel, in this float32 order:
 *   g[k]   = float32(grad[k]) * g_scale (k < K), g[K] = float32(grad_bias) * gb_scale
 *   mu_b   = (sum_k g[k]) / (K + 1), var_b = (sum_k (g[k] - mu_b) * (g[k] - mu_b)) / (K + 1),
 *            sums from +0.0 in increasing k;  sd_b = sqrt(var_b) (correctly rounded)
 *   mu     = initialized ? (1 - a_n) * mu + a_n * mu_b : mu_b (sd likewise)
 *   g_hat  = (g - mu) / (sd + 1e-12), or 0 when sd == 0
 *   new    = float32(w) * s_w - lr * g_hat;  amax = max |new|
 *   lo, hi = (1 - a_w) * lo + a_w * (-amax), (1 - a_w) * hi + a_w * amax
 *   s_w'   = max(-min(lo, 0), max(hi, 0)) / 127 (2^-20 if 0, at least 2^-126)
 *   w'     = clamp(floor(new / s_w' + u), -127, 127), u = uniform01 of the stream
 * No float copy is allocated: the int32 gradient buffer (consumed) holds the row's real gradient,
 * then its new real weights (float32 in the int32 slots).
 */
#include <string.h>

#include "mt_fqt.h"
#include "mt_fqt_math.h"
#include "mt_train.h"

/* The float32 stored in an int32 slot of the consumed gradient buffer (same size, no aliasing UB). */
static float mt_slot_get(const int32_t *slot)
{
    float f;
    memcpy(&f, slot, 4);
    return f;
}

static void mt_slot_set(int32_t *slot, float f)
{
    memcpy(slot, &f, 4);
}

mt_status mt_fqt_upd_s8(const mt_fqt_upd_params *p,
                        int32_t channels,
                        int32_t per_channel,
                        int32_t *grad,
                        const int32_t *grad_bias,
                        const uint8_t *upd,
                        float *norm_mu,
                        float *norm_sd,
                        int8_t *norm_init,
                        int8_t *w,
                        float *s_w,
                        float *w_lo,
                        float *w_hi,
                        float *bias_step,
                        uint32_t *state)
{
    const float kk = (float)(per_channel + 1);
    const float an = p ? p->alpha_norm : 0.0f;
    const float keep_n = 1.0f - an;
    const float aw = p ? p->alpha_w : 0.0f;
    const float keep_w = 1.0f - aw;
    int32_t o, k;
    if (!p || !grad || !grad_bias || !norm_mu || !norm_sd || !norm_init || !w || !s_w || !w_lo || !w_hi ||
        !bias_step || !state || channels < 1 || per_channel < 1) {
        return MT_ERR_ARG;
    }
    for (o = 0; o < channels; ++o) {
        int32_t *g = grad + o * per_channel; /* consumed: real gradient, then the new real weights */
        int8_t *wr = w + o * per_channel;
        const float gb = mt_s64_to_f32(grad_bias[o]) * p->gb_scale;
        float sum = 0.0f, var = 0.0f, mu_b, sd_b, mu, sd, den, amax = 0.0f, lo32, hi32, am, s_new;
        bias_step[o] = 0.0f;
        if (upd && !upd[o]) {
            continue;
        }
        for (k = 0; k < per_channel; ++k) {
            const float v = mt_s32_to_f32(g[k]) * p->g_scale;
            mt_slot_set(&g[k], v);
            sum += v;
        }
        sum += gb;
        mu_b = sum / kk;
        for (k = 0; k < per_channel; ++k) {
            const float d = mt_slot_get(&g[k]) - mu_b;
            var += d * d;
        }
        var += (gb - mu_b) * (gb - mu_b);
        sd_b = mt_sqrt_f32(var / kk);
        if (norm_init[o]) {
            mu = keep_n * norm_mu[o] + an * mu_b;
            sd = keep_n * norm_sd[o] + an * sd_b;
        } else {
            mu = mu_b;
            sd = sd_b;
        }
        norm_mu[o] = mu;
        norm_sd[o] = sd;
        norm_init[o] = 1;
        den = sd + 1e-12f;
        for (k = 0; k < per_channel; ++k) { /* the new real weights and their range */
            const float gh = sd == 0.0f ? 0.0f : (mt_slot_get(&g[k]) - mu) / den;
            const float nw = (float)wr[k] * s_w[o] - p->lr * gh;
            const float a = nw < 0.0f ? -nw : nw;
            amax = a > amax ? a : amax;
            mt_slot_set(&g[k], nw);
        }
        bias_step[o] = sd == 0.0f ? 0.0f : p->lr * ((gb - mu) / den);
        w_lo[o] = keep_w * w_lo[o] + aw * -amax;
        w_hi[o] = keep_w * w_hi[o] + aw * amax;
        lo32 = w_lo[o] < 0.0f ? w_lo[o] : 0.0f;
        hi32 = w_hi[o] > 0.0f ? w_hi[o] : 0.0f;
        am = -lo32 > hi32 ? -lo32 : hi32;
        s_new = am / 127.0f;
        if (am == 0.0f) {
            s_new = mt_pow2_f32(-20);
        } else if (s_new < mt_pow2_f32(-126)) {
            s_new = mt_pow2_f32(-126);
        }
        {
            uint32_t x = *state; /* mt_xorshift32_uniform01 inlined: next(), then (u >> 8) * 2^-24 */
            for (k = 0; k < per_channel; ++k) { /* requantize with the new scale, stochastic rounding */
                float u;
                float r;
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                u = (float)(int32_t)(x >> 8) * 0x1p-24f;
                r = mt_floor_f32(mt_slot_get(&g[k]) / s_new + u);
                r = r < -127.0f ? -127.0f : (r > 127.0f ? 127.0f : r);
                wr[k] = (int8_t)r;
            }
            *state = x;
        }
        s_w[o] = s_new;
    }
    return MT_OK;
}
