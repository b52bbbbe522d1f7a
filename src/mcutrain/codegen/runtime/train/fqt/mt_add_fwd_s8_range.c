/*
 * Residual add that also reports the real range of its result (FQT; Python twin: fqt.FQT._fwd_add):
 * y as mt_add_fwd_s8, and the extremes of float32(a - z_a) * s_a + float32(b - z_b) * s_b over
 * the elements (float32, in that order; build with -ffp-contract=off) merged into *lo / *hi.
 */
#include "mt_fixedpoint.h"
#include "mt_fqt.h"

mt_status mt_add_fwd_s8_range(const mt_add_params *params,
                              int32_t size,
                              const int8_t *a,
                              const int8_t *b,
                              float s_a,
                              float s_b,
                              int8_t *output,
                              float *lo,
                              float *hi)
{
    const mt_add_params *p = params;
    float mn, mx;
    int32_t i;
    if (!p || !a || !b || !output || !lo || !hi || size < 1 || p->right_shift < 1 || p->right_shift > 62 ||
        p->a_multiplier < 0 || p->b_multiplier < 0) {
        return MT_ERR_ARG;
    }
    mn = *lo;
    mx = *hi;
    for (i = 0; i < size; i++) {
        const int32_t ca = (int32_t)a[i] - p->a_zero_point;
        const int32_t cb = (int32_t)b[i] - p->b_zero_point;
        const float real = (float)ca * s_a + (float)cb * s_b; /* |ca|, |cb| <= 255: exact conversions */
        /* NOTE: |ca| <= 255 and Ma, Mb < 2^31: |t| < 2^40, far inside int64 */
        const int64_t t = (int64_t)ca * p->a_multiplier + (int64_t)cb * p->b_multiplier;
        int64_t y = p->output_zero_point + mt_rounding_shift_right_s64(t, p->right_shift);
        mn = real < mn ? real : mn;
        mx = real > mx ? real : mx;
        y = y < p->act_min ? p->act_min : y;
        y = y > p->act_max ? p->act_max : y;
        output[i] = (int8_t)y; /* after reading a[i], b[i]: in place allowed */
    }
    *lo = mn;
    *hi = mx;
    return MT_OK;
}
