/*
 * ZO node perturbation of a layer's int8 output with the STE mask (docs/integer-semantics.md
 * 12.3; Python twin methods/zo_estimator.py estimate_np). The signs are packed 32 per draw:
 * element e is -1 when bit e % 32 of draw e / 32 is set.
 */
#include "mt_train.h"

mt_status mt_zo_perturb_np_s8(uint32_t *state,
                              int32_t sigma,
                              int32_t act_min,
                              int32_t act_max,
                              int32_t size,
                              const int8_t *y,
                              int8_t *y_out)
{
    int32_t i;
    const int32_t s = sigma > 255 ? 255 : sigma; /* the same clamped result, no int32 overflow */
    if (state == NULL || y == NULL || y_out == NULL || sigma < 1 || size < 0 || act_min > act_max) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; i += 32) {
        uint32_t bits = mt_xorshift32_next(state); /* 32 signs; masked elements use theirs too */
        const int32_t end = size - i < 32 ? size : i + 32;
        int32_t e;
        for (e = i; e < end; ++e) {
            int32_t v = y[e];
            if (v > act_min && v < act_max) {
                v += (bits & 1u) != 0u ? -s : s;
            }
            bits >>= 1;
            v = v < act_min ? act_min : (v > act_max ? act_max : v); /* every element, as the Python clip */
            y_out[e] = (int8_t)v;
        }
    }
    return MT_OK;
}
