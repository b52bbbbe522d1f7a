/*
 * The selection of dynamic partial updates (Python twin: methods.partial.top_k_mask): the k
 * largest keys, ties to the lower index, as a mask and a list of the kept channels. Its own file
 * so the reference and the DSP twin of mt_fqt_topk.c both use it.
 */
#include <string.h>

#include "mt_fqt.h"
#include "mt_fqt_keep.h"

int32_t mt_fqt_topk_select(int32_t channels, int32_t k, int32_t *list, uint8_t *mask)
{
    /* k <= channels / 2: take the largest k times (first index on ties, by a strict >), each taken
     * key set below every key; else drop the smallest channels - k times (last index on ties, by
     * <=), each dropped key set above every key. The same set as a stable sort's first k. */
    const int32_t take = 2 * k <= channels;
    int32_t r = take ? k : channels - k, c, n = 0;
    memset(mask, take ? 0 : 1, (size_t)channels);
    for (; r > 0; --r) {
        int32_t best = 0, v = list[0];
        if (take) {
            for (c = 1; c < channels; ++c) {
                if (list[c] > v) {
                    v = list[c];
                    best = c;
                }
            }
            list[best] = INT32_MIN;
        } else {
            for (c = 1; c < channels; ++c) {
                if (list[c] <= v) {
                    v = list[c];
                    best = c;
                }
            }
            list[best] = INT32_MAX;
        }
        mask[best] = (uint8_t)take;
    }
    for (c = 0; c < channels; ++c) {
        if (mask[c]) {
            list[n++] = c;
        }
    }
    return n;
}
