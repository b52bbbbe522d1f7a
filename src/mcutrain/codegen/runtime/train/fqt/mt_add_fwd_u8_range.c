/*
 * uint8 residual add that also reports the real range of its result (Python twin: fqt.FQT._fwd_add,
 * precision uint8): ca = float32(a - z_a), cb = float32(b - z_b),
 * y = clamp(floor(ca * m_a + cb * m_b) + float32(z_y), act_min, act_max), and the extremes of
 * ca * s_a + cb * s_b merged into *lo / *hi (float32, in that order; build with -ffp-contract=off).
 */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

mt_status mt_add_fwd_u8_range(int32_t size,
                              const uint8_t *a,
                              int32_t a_zero_point,
                              float s_a,
                              float m_a,
                              const uint8_t *b,
                              int32_t b_zero_point,
                              float s_b,
                              float m_b,
                              int32_t out_zero_point,
                              int32_t act_min,
                              int32_t act_max,
                              uint8_t *output,
                              float *lo,
                              float *hi)
{
    float mn, mx;
    int32_t i;
    if (!a || !b || !output || !lo || !hi || size < 1 || act_min < 0 || act_max > 255 || act_min > act_max) {
        return MT_ERR_ARG;
    }
    mn = *lo;
    mx = *hi;
    for (i = 0; i < size; i++) {
        const float ca = (float)((int32_t)a[i] - a_zero_point); /* |a - z| <= 255: exact */
        const float cb = (float)((int32_t)b[i] - b_zero_point);
        const float real = ca * s_a + cb * s_b;
        const float v = mt_floor_f32(ca * m_a + cb * m_b) + (float)out_zero_point;
        mn = real < mn ? real : mn;
        mx = real > mx ? real : mx;
        if (!(v >= (float)act_min)) {
            output[i] = (uint8_t)act_min;
        } else {
            output[i] = (uint8_t)(v > (float)act_max ? act_max : (int32_t)v); /* after reading a[i], b[i] */
        }
    }
    *lo = mn;
    *hi = mx;
    return MT_OK;
}
