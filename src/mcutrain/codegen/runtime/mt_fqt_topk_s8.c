/*
 * Dynamic partial updates of seed A on the device (Python twins: methods.partial.keep_counts,
 * magnitudes and top_k_mask): per sample, the k structures (conv filters, linear rows) whose
 * errors have the largest sum of |e| are kept, ties to the lower index; the errors of the others
 * are zeroed in place, and the kept channels are listed so the kernels that follow skip the rest.
 */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

int32_t mt_fqt_keep_count(int32_t loss, int32_t loss_max, float lambda_min, float lambda_max, int32_t n)
{
    const float den = (float)(loss_max > 1 ? loss_max : 1);
    const float r = (loss < 0 ? -mt_s64_to_f32(loss) : mt_s64_to_f32(loss)) / den;
    float lam = lambda_min + r * (lambda_max - lambda_min);
    float k;
    lam = lam < 1.0f ? lam : 1.0f;
    k = mt_floor_f32(lam * (float)n);
    return k < 1.0f ? 1 : (k > (float)n ? n : (int32_t)k);
}

mt_status mt_fqt_topk_s8(int32_t rows, int32_t channels, int32_t k, int8_t *e, int32_t *list, uint8_t *mask,
                         int32_t *kept)
{
    int32_t p, c, j, n = 0;
    if (!e || !list || !mask || !kept || channels < 1 || rows < 0) {
        return MT_ERR_ARG;
    }
    for (c = 0; c < channels; ++c) { /* magnitudes, exact: |e| <= 127 per position */
        int32_t m = 0;
        for (p = 0; p < rows; ++p) {
            const int32_t v = e[p * channels + c];
            m += v < 0 ? -v : v;
        }
        list[c] = m;
    }
    for (c = 0; c < channels; ++c) { /* rank: larger magnitudes first, ties to the lower index */
        int32_t rank = 0;
        for (j = 0; j < channels; ++j) {
            rank += list[j] > list[c] || (list[j] == list[c] && j < c);
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
                e[p * channels + c] = 0;
            }
        }
    }
    *kept = n;
    return MT_OK;
}
