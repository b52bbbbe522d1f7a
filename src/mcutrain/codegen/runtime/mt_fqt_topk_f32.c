/*
 * Dynamic partial updates on float32 errors (Python twins: methods.partial.magnitudes and
 * top_k_mask): per channel the float32 sum of |e| over the rows in order from +0.0, the k largest
 * kept (ties to the lower index, as a stable sort), the others' errors set to 0.
 */
#include "mt_fqt.h"

mt_status mt_fqt_topk_f32(int32_t rows, int32_t channels, int32_t k, float *e, float *scratch, int32_t *list,
                          uint8_t *mask, int32_t *kept)
{
    int32_t p, c, j, n = 0;
    if (!e || !scratch || !list || !mask || !kept || channels < 1 || rows < 0) {
        return MT_ERR_ARG;
    }
    for (c = 0; c < channels; ++c) {
        float m = 0.0f;
        for (p = 0; p < rows; ++p) {
            const float v = e[p * channels + c];
            m += v < 0.0f ? -v : v;
        }
        scratch[c] = m;
    }
    for (c = 0; c < channels; ++c) {
        int32_t rank = 0;
        for (j = 0; j < channels; ++j) {
            rank += scratch[j] > scratch[c] || (scratch[j] == scratch[c] && j < c);
        }
        mask[c] = (uint8_t)(rank < k);
    }
    for (c = 0; c < channels; ++c) {
        if (mask[c]) {
            list[n++] = c;
        }
    }
    for (p = 0; p < rows; ++p) {
        for (c = 0; c < channels; ++c) {
            if (!mask[c]) {
                e[p * channels + c] = 0.0f;
            }
        }
    }
    *kept = n;
    return MT_OK;
}
