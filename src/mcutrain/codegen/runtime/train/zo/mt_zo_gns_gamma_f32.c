/* The GNS shrink of the ZO estimate (docs/integer-semantics.md 12.5; zo_estimator.gns_gamma). */
#include "mt_train.h"
#include "mt_train_math.h"

float mt_zo_gns_gamma_f32(int64_t numer, int64_t dim_minus_one, int32_t enabled)
{
    if (!enabled) {
        return 1.0f;
    }
    return mt_s64_to_f32(numer) / mt_s64_to_f32(numer + dim_minus_one);
}
