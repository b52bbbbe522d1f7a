/*
 * ZO weight perturbation of one layer (docs/integer-semantics.md 12.2-12.3; Python twin
 * methods/zo_estimator.py perturbed_params and the stream order of estimate_wp). The nw + nb
 * signs are packed 32 per draw: element e (weights, then biases) is -1 when bit e % 32 of draw
 * e / 32 is set.
 */
#include "mt_train.h"

mt_status mt_zo_perturb_wp_s8(uint32_t *state,
                              int32_t sigma_w,
                              int32_t sigma_b,
                              int32_t nw,
                              const int8_t *w,
                              int32_t nb,
                              const int32_t *b,
                              int8_t *w_out,
                              int32_t *b_out)
{
    int32_t i;
    uint32_t bits = 0u; /* the current draw, shifted so its next sign is bit 0 */
    int32_t left = 0;   /* signs left in `bits` */
    const int32_t sw = sigma_w > 255 ? 255 : sigma_w; /* the same clamped result, no int32 overflow */
    if (state == NULL || sigma_w < 1 || sigma_b < 1 || nw < 0 || nb < 0 || (nw > 0 && (w == NULL || w_out == NULL)) ||
        (nb > 0 && (b == NULL || b_out == NULL))) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < nw; ++i) {
        int32_t v;
        if (left == 0) {
            bits = mt_xorshift32_next(state);
            left = 32;
        }
        v = (int32_t)w[i] + ((bits & 1u) != 0u ? -sw : sw);
        bits >>= 1;
        --left;
        v = v < -127 ? -127 : (v > 127 ? 127 : v); /* the int8 weight range */
        w_out[i] = (int8_t)v;
    }
    for (i = 0; i < nb; ++i) {
        int64_t v;
        if (left == 0) {
            bits = mt_xorshift32_next(state);
            left = 32;
        }
        v = (int64_t)b[i] + ((bits & 1u) != 0u ? -(int64_t)sigma_b : (int64_t)sigma_b);
        bits >>= 1;
        --left;
        v = v < INT32_MIN ? INT32_MIN : (v > INT32_MAX ? INT32_MAX : v);
        b_out[i] = (int32_t)v;
    }
    return MT_OK;
}
