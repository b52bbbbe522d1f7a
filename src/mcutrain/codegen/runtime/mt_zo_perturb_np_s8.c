/*
 * ZO node perturbation of a layer's int8 output with the STE mask (docs/integer-semantics.md
 * 12.3; Python twin methods/zo_estimator.py estimate_np).
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
    if (state == NULL || y == NULL || y_out == NULL || sigma < 1 || size < 0 || act_min > act_max) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; ++i) {
        const int32_t u = mt_xorshift32_rademacher(state); /* drawn even where masked */
        int32_t v = y[i];
        if (v > act_min && v < act_max) {
            v += sigma * u;
        }
        v = v < act_min ? act_min : (v > act_max ? act_max : v); /* every element, as the Python clip */
        y_out[i] = (int8_t)v;
    }
    return MT_OK;
}
