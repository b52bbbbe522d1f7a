/*
 * mt_fqt_prescale_s16 on the kept channels of a partial update, written compacted (Python twin:
 * fqt.FQT._prescale_errors on the kept columns), so the error propagation that follows runs a
 * dense loop over n_keep channels (rows padded with zero columns to MT_FQT_KEEP_STRIDE). s_max is still the maximum over every channel: the ratios and
 * the accumulator's scale are those of the dense step.
 */
#include "mt_fqt_keep.h"
#include "mt_train_math.h"

mt_status mt_fqt_prescale_s16_keep(int32_t rows,
                                   int32_t channels,
                                   const int32_t *keep,
                                   int32_t n_keep,
                                   const int8_t *e,
                                   const float *s_w,
                                   int16_t *e16,
                                   float *s_max)
{
    float smax;
    int32_t o, p, t, stride;
    if (!keep || !e || !s_w || !e16 || !s_max || channels < 1 || rows < 0 || n_keep < 0 || n_keep > channels) {
        return MT_ERR_ARG;
    }
    smax = s_w[0];
    for (o = 1; o < channels; ++o) {
        smax = s_w[o] > smax ? s_w[o] : smax;
    }
    *s_max = smax;
    stride = MT_FQT_KEEP_STRIDE(n_keep, channels);
    for (t = n_keep; t < stride; ++t) { /* zero columns up to the stride */
        for (p = 0; p < rows; ++p) {
            e16[p * stride + t] = 0;
        }
    }
    for (t = 0; t < n_keep; ++t) {
        const int32_t c = keep[t];
        const int32_t r = (int32_t)mt_round_half_away_inline_f32((s_w[c] / smax) * 32768.0f);
        for (p = 0; p < rows; ++p) {
            const int32_t v = (int32_t)e[p * channels + c] * r; /* |v| <= 127 * 2^15 */
            const int32_t mag = ((v < 0 ? -v : v) + 64) >> 7;
            e16[p * stride + t] = (int16_t)(v < 0 ? -mag : mag);
        }
    }
    return MT_OK;
}
