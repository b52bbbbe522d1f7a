/*
 * Dynamic partial updates of seed A on the device (Python twins: methods.partial.keep_counts,
 * magnitudes and top_k_mask): per sample, the k structures (conv filters, linear rows) whose
 * errors have the largest sum of |e - z_e| are kept, ties to the lower index; the errors of the
 * others are set to z_e (a centred 0) in place, and the kept channels are listed so the kernels
 * that follow skip the rest. int8 errors are uint8 ones with z_e = 128 after flipping the sign bit.
 *
 * Cost, for rows x channels errors: the magnitudes walk the errors once, |e - z| looked up in a
 * table of the 256 byte values (mt_fqt_topk_ref.h); the selection (mt_fqt_topk_select.c) is
 * O(channels * min(k, channels - k)). Reference kernel; dsp/mt_fqt_topk.c is its DSP twin.
 */
#include "mt_fqt.h"
#include "mt_fqt_topk_ref.h"

mt_status mt_fqt_topk_s8(int32_t rows, int32_t channels, int32_t k, int8_t *e, int32_t *list, uint8_t *mask,
                         int32_t *kept)
{
    return mt_fqt_topk_bytes_ref(rows, channels, k, 0, 1, (uint8_t *)e, list, mask, kept);
}

mt_status mt_fqt_topk_u8(int32_t rows, int32_t channels, int32_t k, int32_t e_zero_point, uint8_t *e,
                         int32_t *list, uint8_t *mask, int32_t *kept)
{
    return mt_fqt_topk_bytes_ref(rows, channels, k, e_zero_point, 0, e, list, mask, kept);
}
