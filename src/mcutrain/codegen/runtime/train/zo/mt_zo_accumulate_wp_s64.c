/*
 * ZO weight-perturbation sum S[e] += dL * u[e] (docs/integer-semantics.md 12.4), replaying the
 * query's draws (32 signs each) from a saved copy of the stream state instead of storing the
 * perturbation.
 */
#include "mt_train.h"

mt_status mt_zo_accumulate_wp_s64(uint32_t *state, int64_t dl, int32_t d, int64_t *sums)
{
    int32_t i;
    if (state == NULL || d < 0 || (d > 0 && sums == NULL)) {
        return MT_ERR_ARG;
    }
    /* |dl| < B * 2^24 and fewer than 2^20 queries: no int64 overflow */
    for (i = 0; i < d; i += 32) {
        uint32_t bits = mt_xorshift32_next(state);
        const int32_t end = d - i < 32 ? d : i + 32;
        int32_t e;
        for (e = i; e < end; ++e) {
            sums[e] += (bits & 1u) != 0u ? -dl : dl;
            bits >>= 1;
        }
    }
    return MT_OK;
}
