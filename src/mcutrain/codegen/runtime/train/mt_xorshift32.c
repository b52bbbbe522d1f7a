/*
 * The xorshift32 stream (docs/integer-semantics.md section 5; Python twin quant/rng.py):
 * Marsaglia's xorshift32 with shifts (13, 17, 5) (G. Marsaglia, "Xorshift RNGs", J. Stat.
 * Softw. 8(14), 2003). One state word is the whole generator, so save/resume is one uint32.
 */
#include "mt_train.h"

#define MT_XORSHIFT32_ZERO_SEED 2463534242u /* Marsaglia's example seed; 0 is the fixed point */

uint32_t mt_xorshift32_seed(uint32_t seed)
{
    return seed != 0u ? seed : MT_XORSHIFT32_ZERO_SEED;
}

uint32_t mt_xorshift32_next(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}

void mt_xorshift32_draw_u32(uint32_t *state, int32_t n, uint32_t *out)
{
    int32_t i;
    for (i = 0; i < n; ++i) {
        out[i] = mt_xorshift32_next(state);
    }
}

int32_t mt_xorshift32_rademacher(uint32_t *state)
{
    return (mt_xorshift32_next(state) >> 31) != 0u ? -1 : 1;
}

float mt_xorshift32_uniform01(uint32_t *state)
{
    /* u >> 8 < 2^24 converts exactly; the power-of-two scaling is exact too */
    return (float)(int32_t)(mt_xorshift32_next(state) >> 8) * (1.0f / 16777216.0f);
}
