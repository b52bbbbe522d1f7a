/*
 * Fixed-point multipliers computed on the device (Python twin: quant.fixedpoint.quantize_multiplier,
 * output_multiplier). frexp is read from the float64 bits, so no libm is involved; the products and
 * the division are single IEEE float64 operations.
 */
#include <string.h>

#include "mt_fqt.h"

mt_status mt_fqt_quantize_multiplier(double m, int32_t *multiplier, int32_t *shift)
{
    uint64_t bits;
    uint64_t mant;
    int32_t ex;
    int64_t q;
    int32_t e;
    if (!(m >= 0.0) || m > 1.0e300) {
        return MT_ERR_ARG;
    }
    *multiplier = 0;
    *shift = 0;
    if (m == 0.0) {
        return MT_OK;
    }
    memcpy(&bits, &m, 8);
    ex = (int32_t)((bits >> 52) & 0x7FFu);
    mant = bits & (((uint64_t)1 << 52) - 1u);
    if (ex == 0) {
        return MT_OK; /* subnormal: far below 2^-32 */
    }
    mant |= (uint64_t)1 << 52;          /* m = (mant / 2^53) * 2^e, mant / 2^53 in [0.5, 1) */
    e = ex - 1022;
    q = (int64_t)((mant + ((uint64_t)1 << 21)) >> 22); /* floor(f * 2^31 + 0.5), exact */
    if (q == ((int64_t)1 << 31)) {
        q = (int64_t)1 << 30;
        ++e;
    }
    if (e > 30) {
        return MT_ERR_ARG;
    }
    if (e < 31 - 62) {
        return MT_OK;
    }
    *multiplier = (int32_t)q;
    *shift = e;
    return MT_OK;
}

mt_status mt_fqt_output_multipliers(float s_x, const float *s_w, float s_y, int32_t channels,
                                    int32_t *multiplier, int32_t *shift)
{
    int32_t c;
    for (c = 0; c < channels; ++c) {
        const double m = (double)s_x * (double)s_w[c] / (double)s_y;
        const mt_status st = mt_fqt_quantize_multiplier(m, &multiplier[c], &shift[c]);
        if (st != MT_OK) {
            return st;
        }
    }
    return MT_OK;
}
