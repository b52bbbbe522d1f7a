/* STE backward of the requantization (docs/integer-semantics.md 12.6; ste_kernels.requant_bwd_f32). */
#include "mt_train.h"

mt_status mt_requant_bwd_s8_f32(int32_t rows,
                                int32_t channels,
                                const float *e_y,
                                const int8_t *y,
                                const float *slope,
                                int32_t act_min,
                                int32_t act_max,
                                float *e_acc)
{
    int32_t m;
    int32_t c;
    if (e_y == NULL || y == NULL || slope == NULL || e_acc == NULL || rows < 1 || channels < 1) {
        return MT_ERR_ARG;
    }
    for (m = 0; m < rows; ++m) {
        const int64_t base = (int64_t)m * channels;
        for (c = 0; c < channels; ++c) {
            const int32_t v = y[base + c];
            e_acc[base + c] = (v > act_min && v < act_max) ? e_y[base + c] * slope[c] : 0.0f;
        }
    }
    return MT_OK;
}
