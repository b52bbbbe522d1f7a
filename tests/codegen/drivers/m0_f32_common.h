/* Operands of every float32 class and a bitwise compare for the m0_f32 drivers (test_m0_f32.py). */
#ifndef M0_F32_COMMON_H
#define M0_F32_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static uint32_t s;
static uint32_t rnd(void) { s ^= s << 13; s ^= s >> 17; s ^= s << 5; return s; }
static uint32_t below(uint32_t n) { return rnd() % n; }
/* float32 bits of every class, most of them normal over a wide range */
static uint32_t operand(void)
{
    const uint32_t u = rnd(), sign = u & 0x80000000u, frac = rnd() & 0x7FFFFFu;
    switch (below(16)) {
    case 0: return sign | (frac >> below(24));                                /* subnormal, zero */
    case 1: return sign | 0x7F800000u | (below(3) == 0 ? 0u : frac);          /* inf, NaN */
    case 2: return sign | ((1u + below(8)) << 23) | frac;                      /* near subnormal */
    case 3: return sign | ((240u + below(15)) << 23) | frac;                   /* near overflow */
    case 4: return sign | ((100u + below(50)) << 23) | ((below(2) ? 0x7FFFFFu : 0u) ^ below(16));
    case 5: return sign | ((100u + below(50)) << 23) | (frac & ~((1u << below(23)) - 1u)); /* ties */
    case 6: return 0u;
    default: return sign | ((90u + below(70)) << 23) | frac;
    }
}
static float f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static int same(uint32_t a, uint32_t b) { return a == b || ((a << 1) > 0xFF000000u && (b << 1) > 0xFF000000u); }
#endif /* M0_F32_COMMON_H */
