/*
 * Residual-add multipliers computed on the device from the current scales (Python twin:
 * quant.fixedpoint.add_multipliers; docs/integer-semantics.md section 7, "add"): ra = (double)s_a /
 * (double)s_y, rb likewise; n = min(31 - e, 62) with frexp(max(ra, rb)) = (f, e);
 * Ma = round_half_away(ra * 2^n), Mb likewise; one retry with n - 1 if either reaches 2^31.
 * frexp is read from the float64 bits and 2^n built from them, so no libm is involved.
 */
#include <string.h>

#include "mt_fqt.h"

/* 2^n as float64, n in [1, 62]. */
static double pow2_f64(int32_t n)
{
    const uint64_t bits = (uint64_t)(n + 1023) << 52;
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

mt_status mt_fqt_add_multipliers(float s_a, float s_b, float s_y, mt_add_params *p)
{
    const double ra = (double)s_a / (double)s_y;
    const double rb = (double)s_b / (double)s_y;
    const double r = ra > rb ? ra : rb;
    uint64_t bits;
    int32_t n, tries;
    if (!p || !(ra > 0.0) || !(rb > 0.0) || !(r < 1.0e300)) {
        return MT_ERR_ARG;
    }
    memcpy(&bits, &r, 8);
    if (((bits >> 52) & 0x7FFu) == 0) {
        return MT_ERR_ARG; /* subnormal ratio: the scales are broken */
    }
    n = 31 - ((int32_t)((bits >> 52) & 0x7FFu) - 1022);
    n = n > 62 ? 62 : n;
    for (tries = 0; tries < 2; ++tries, --n) {
        double fa, fb;
        if (n < 1) {
            return MT_ERR_ARG; /* a ratio >= 2^30 cannot be requantized */
        }
        fa = ra * pow2_f64(n); /* exact: a power-of-two scaling */
        fb = rb * pow2_f64(n);
        /* round half away of a positive value below 2^31 + 1: floor(v + 0.5) is exact here */
        fa = (double)(int64_t)(fa + 0.5);
        fb = (double)(int64_t)(fb + 0.5);
        if (fa < 2147483648.0 && fb < 2147483648.0) {
            p->a_multiplier = (int32_t)fa;
            p->b_multiplier = (int32_t)fb;
            p->right_shift = n;
            return MT_OK;
        }
    }
    return MT_ERR_ARG;
}
