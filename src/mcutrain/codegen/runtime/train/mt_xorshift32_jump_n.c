/*
 * Jump the xorshift32 stream by a count known only on the device (partial updates draw for the
 * kept rows only): T^n as a product of the powers T^(2^i) whose columns the exporter tabulates.
 */
#include "mt_fqt.h"

void mt_xorshift32_jump_n(uint32_t *state, uint32_t n, const uint32_t *powers, int32_t bits)
{
    int32_t i;
    for (i = 0; i < bits && (n >> i) != 0u; ++i) {
        if ((n >> i) & 1u) {
            mt_xorshift32_jump(state, powers + 32 * i);
        }
    }
}
