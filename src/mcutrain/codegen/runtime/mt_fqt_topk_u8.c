/*
 * Dynamic partial updates on uint8 errors (Python twins: methods.partial.magnitudes and top_k_mask
 * on centred errors): per channel sum |e - z_e| over the rows (exact int32 below 2^31 / 255 rows),
 * the k largest kept (ties to the lower index), the others' errors set to z_e (a centred 0).
 */
#include "mt_fqt.h"

mt_status mt_fqt_topk_u8(int32_t rows, int32_t channels, int32_t k, int32_t e_zero_point, uint8_t *e,
                         int32_t *list, uint8_t *mask, int32_t *kept)
{
    int32_t p, c, j, n = 0;
    if (!e || !list || !mask || !kept || channels < 1 || rows < 0) {
        return MT_ERR_ARG;
    }
    for (c = 0; c < channels; ++c) {
        int32_t m = 0;
        for (p = 0; p < rows; ++p) {
            const int32_t v = (int32_t)e[p * channels + c] - e_zero_point;
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
                e[p * channels + c] = (uint8_t)e_zero_point;
            }
        }
    }
    *kept = n;
    return MT_OK;
}
