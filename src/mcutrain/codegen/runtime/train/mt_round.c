/*
 * Rounding modes of docs/integer-semantics.md section 4 (Python twin quant/rounding.py):
 * nearest (half away from zero) and stochastic rounding, float and integer forms.
 */
#include "mt_train.h"
#include "mt_train_math.h"

float mt_round_half_away_f32(float x)
{
    return mt_round_half_away_inline_f32(x);
}

float mt_round_stochastic_f32(float x, uint32_t *state)
{
    const float r = mt_xorshift32_uniform01(state);
    return mt_floor_f32(x + r); /* the sum in float32, then floor */
}

int64_t mt_stochastic_shift_right_s64(int64_t x, int32_t n, uint32_t *state)
{
    int64_t v;
    if (n <= 0) {
        return x;
    }
    v = x + (int64_t)(mt_xorshift32_next(state) >> (32 - n));
    /* NOTE: floor division by 2^n without shifting a negative value */
    if (v >= 0) {
        return v >> n;
    }
    return -(int64_t)((((uint64_t)0 - (uint64_t)v) + (((uint64_t)1 << n) - 1u)) >> n);
}
