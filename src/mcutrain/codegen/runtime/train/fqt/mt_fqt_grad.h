/*
 * mcutrain runtime: internal helpers of the FQT updates of precisions uint8, mixed and float32
 * (not public API): reading a stored gradient as a real value, and one channel's standardization
 * statistics (fqt.FQT._standardize, float32 in the order written there).
 */
#ifndef MT_FQT_GRAD_H
#define MT_FQT_GRAD_H

#include <stdint.h>

#include "mt_fqt.h"
#include "mt_fqt_math.h"

/* The real value of element k of a stored gradient (mt_fqt_grad). */
MT_INLINE float mt_fqt_grad_at(const mt_fqt_grad *g, int32_t k)
{
    switch (g->type) {
    case MT_FQT_GRAD_U8:
        return (float)((int32_t)((const uint8_t *)g->data)[k] - g->zero_point) * g->scale;
    case MT_FQT_GRAD_S16:
        return (float)((int32_t)((const int16_t *)g->data)[k] - g->zero_point) * g->scale;
    case MT_FQT_GRAD_S32:
        return mt_s64_to_f32((int64_t)((const int32_t *)g->data)[k] - g->zero_point) * g->scale;
    default:
        return ((const float *)g->data)[k] * g->scale;
    }
}

/* A valid mt_fqt_grad: data given and a known type. */
MT_INLINE int mt_fqt_grad_ok(const mt_fqt_grad *g)
{
    return g != NULL && g->data != NULL && g->type >= MT_FQT_GRAD_U8 && g->type <= MT_FQT_GRAD_F32;
}

/*
 * One updated channel's statistics from its batch values: mu = (1 - a) * mu + a * mu_b (likewise
 * sd), or the batch values on the channel's first update; returns sd (the caller's g_hat is 0
 * when sd == 0, else (g - mu) / (sd + 1e-12)).
 */
MT_INLINE float mt_fqt_norm_ema(float mu_b, float sd_b, float alpha_norm, float *norm_mu, float *norm_sd,
                                int8_t *norm_init)
{
    const float keep = 1.0f - alpha_norm;
    if (*norm_init) {
        *norm_mu = keep * *norm_mu + alpha_norm * mu_b;
        *norm_sd = keep * *norm_sd + alpha_norm * sd_b;
    } else {
        *norm_mu = mu_b;
        *norm_sd = sd_b;
    }
    *norm_init = 1;
    return *norm_sd;
}

#endif /* MT_FQT_GRAD_H */
