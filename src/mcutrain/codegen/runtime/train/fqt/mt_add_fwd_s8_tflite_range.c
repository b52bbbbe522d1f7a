/*
 * TFLite's int8 ADD that also reports the real range of its result (FQT, mode "tflite"; Python
 * twin: fqt.FQT._fwd_add): the extremes of float32(a - z_a) * s_a + float32(b - z_b) * s_b (float32,
 * in that order; build with -ffp-contract=off) merged into *lo / *hi in a first pass that only
 * reads, then y = mt_add_fwd_s8_tflite (its DSP form where it has one), so in place is allowed.
 */
#include "mt_fqt.h"
#include "mt_nn.h"

mt_status mt_add_fwd_s8_tflite_range(const mt_add_tflite_params *params,
                                     int32_t size,
                                     const int8_t *a,
                                     const int8_t *b,
                                     float s_a,
                                     float s_b,
                                     int8_t *output,
                                     float *lo,
                                     float *hi)
{
    float mn, mx;
    int32_t i;
    if (!params || !a || !b || !output || !lo || !hi || size < 1) {
        return MT_ERR_ARG;
    }
    mn = *lo;
    mx = *hi;
    for (i = 0; i < size; i++) {
        /* |a - z_a|, |b - z_b| <= 255: exact conversions */
        const float real = (float)((int32_t)a[i] - params->a_zero_point) * s_a +
                           (float)((int32_t)b[i] - params->b_zero_point) * s_b;
        mn = real < mn ? real : mn;
        mx = real > mx ? real : mx;
    }
    *lo = mn;
    *hi = mx;
    return mt_add_fwd_s8_tflite(params, size, a, b, output);
}
