/* The scalar ZO coefficient c0 (docs/integer-semantics.md 12.5; zo_estimator.estimate_wp/np). */
#include "mt_train.h"
#include "mt_train_math.h"

float mt_zo_coef_f32(float gamma, int32_t queries, int32_t sigma, int32_t batch)
{
    const float den = mt_s64_to_f32((int64_t)queries * sigma * batch);
    return (gamma / den) * (1.0f / 65536.0f); /* 2^-16: the Q16 loss unit */
}
