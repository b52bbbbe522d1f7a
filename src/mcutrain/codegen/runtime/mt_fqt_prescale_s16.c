/*
 * int8 errors times Q15 per-channel weight-scale ratios into int16 (Python twin:
 * fqt.FQT._prescale_errors), so one power-of-two error scale serves every output channel of the
 * transposed GEMM that follows.
 */
#include "mt_fqt.h"
#include "mt_train_math.h"

mt_status mt_fqt_prescale_s16(int32_t rows, int32_t channels, const int8_t *e, const float *s_w, int16_t *e16,
                              float *s_max)
{
    float smax;
    int32_t o, p;
    if (!e || !s_w || !e16 || !s_max || channels < 1 || rows < 0) {
        return MT_ERR_ARG;
    }
    smax = s_w[0];
    for (o = 1; o < channels; ++o) {
        smax = s_w[o] > smax ? s_w[o] : smax;
    }
    *s_max = smax;
    for (o = 0; o < channels; ++o) {
        const int32_t r = (int32_t)mt_round_half_away_inline_f32((s_w[o] / smax) * 32768.0f);
        for (p = 0; p < rows; ++p) {
            const int32_t v = (int32_t)e[p * channels + o] * r; /* |v| <= 127 * 2^15 */
            const int32_t mag = ((v < 0 ? -v : v) + 64) >> 7;
            e16[p * channels + o] = (int16_t)(v < 0 ? -mag : mag);
        }
    }
    return MT_OK;
}
