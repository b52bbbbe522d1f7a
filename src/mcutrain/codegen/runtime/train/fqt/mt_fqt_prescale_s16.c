/*
 * int8 errors times Q15 per-channel weight-scale ratios into int16 (Python twin:
 * fqt.FQT._prescale_errors), so one power-of-two error scale serves every output channel of the
 * transposed GEMM that follows.
 * The ratios r[o] are computed once per call (up to PRESCALE_OMAX channels on the stack), then
 * the rows run with the channel innermost: round_half_away(v / 2^7) of v = e * r is
 * (v + 64 + (v >> 31)) >> 7 with arithmetic shifts (v >= 0: floor((v + 64) / 128); v < 0:
 * floor((v + 63) / 128) = -floor((-v + 64) / 128)), and a zero error stays 0 without a multiply.
 */
#include "mt_fqt.h"
#include "mt_train_math.h"

#define PRESCALE_OMAX 128

/* Stops a compiler whose >> of a negative int32 is not arithmetic (every supported one is). */
typedef char mt_prescale_shift_check[(-1 >> 1) == -1 ? 1 : -1];

/* round_half_away(e * r / 2^7) for |e * r| <= 127 * 2^15. */
static inline int16_t prescale_one(int32_t e, int32_t r)
{
    const int32_t v = e * r;
    return (int16_t)((v + 64 + (v < 0 ? -1 : 0)) >> 7);
}

mt_status mt_fqt_prescale_s16(int32_t rows, int32_t channels, const int8_t *e, const float *s_w, int16_t *e16,
                              float *s_max)
{
    int32_t ratio[PRESCALE_OMAX];
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
    if (channels <= PRESCALE_OMAX) {
        for (o = 0; o < channels; ++o) {
            ratio[o] = (int32_t)mt_round_half_away_inline_f32((s_w[o] / smax) * 32768.0f);
        }
        for (p = 0; p < rows; ++p) {
            const int8_t *er = e + p * channels;
            int16_t *out = e16 + p * channels;
            for (o = 0; o < channels; ++o) {
                out[o] = er[o] == 0 ? 0 : prescale_one(er[o], ratio[o]);
            }
        }
        return MT_OK;
    }
    for (o = 0; o < channels; ++o) {
        const int32_t r = (int32_t)mt_round_half_away_inline_f32((s_w[o] / smax) * 32768.0f);
        for (p = 0; p < rows; ++p) {
            e16[p * channels + o] = prescale_one(e[p * channels + o], r);
        }
    }
    return MT_OK;
}
