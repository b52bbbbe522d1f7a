/*
 * Jump ahead in the xorshift32 stream (Python twin: quant.rng.XorShift32.advance): the update is
 * linear over GF(2), so n steps are one 32 x 32 bit matrix T^n, given by its columns (the images
 * of the unit bits) that the exporter computes. 32 conditional XORs instead of n steps.
 */
#include "mt_fqt.h"

void mt_xorshift32_jump(uint32_t *state, const uint32_t *columns)
{
    const uint32_t s = *state;
    uint32_t out = 0u;
    int32_t b;
    for (b = 0; b < 32; ++b) {
        if ((s >> b) & 1u) {
            out ^= columns[b];
        }
    }
    *state = out;
}
