/*
 * mcutrain runtime: the range step shared by the logit-error kernels (mt_fqt_logit_error_s8 / _u8),
 * always inline (not public API): both precisions see the same Q24 range and seed its EMA alike.
 */
#ifndef MT_FQT_LOGIT_ERROR_H
#define MT_FQT_LOGIT_ERROR_H

#include <stdint.h>

#include "mt_fqt_common.h"
#include "mt_train_math.h"

/*
 * The Q24 error's range, err[0..size) * 2^-24, recorded into *r (mt_fqt_range_see), then seeded when
 * `seed` (a batch-1 first step). Returns r->initialized: 0 means no error scale exists yet.
 *   size in: >= 1;  err in: [size] Q24 errors p - onehot
 */
MT_INLINE int32_t mt_fqt_logit_error_range(int32_t size, const int32_t *err, int32_t seed, mt_fqt_range *r)
{
    int32_t lo = 0, hi = 0, i;
    for (i = 0; i < size; ++i) {
        lo = (i == 0 || err[i] < lo) ? err[i] : lo;
        hi = (i == 0 || err[i] > hi) ? err[i] : hi;
    }
    mt_fqt_range_see(r, mt_s64_to_f32(lo) * mt_pow2_f32(-24), mt_s64_to_f32(hi) * mt_pow2_f32(-24));
    if (seed) {
        mt_fqt_range_seed(r);
    }
    return r->initialized;
}

#endif /* MT_FQT_LOGIT_ERROR_H */
