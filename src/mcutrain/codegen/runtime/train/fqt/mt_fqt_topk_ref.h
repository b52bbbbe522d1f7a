/*
 * The reference body of mt_fqt_topk_s8 / mt_fqt_topk_u8 (train/fqt/mt_fqt_topk.c), always inline
 * and in parts: the reference kernel is all of them, and the DSP twin (dsp/mt_fqt_topk.c) runs
 * the per-channel parts for the channels its four-channel words leave (and the whole body on a
 * core without DSP), so both builds share one definition of the magnitudes, the selection and
 * the pruning.
 *
 * One body for int8 (is_signed: magnitudes |e|, pruned errors 0) and uint8 (|e - z|, pruned
 * errors z), inlined with a constant is_signed; int8 errors are uint8 ones with z = 128 after
 * flipping the sign bit.
 */
#ifndef MT_FQT_TOPK_REF_H
#define MT_FQT_TOPK_REF_H

#include <string.h>

#include "mt_arch.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"

/* Errors from which a 256-entry table of |e - z| (on the stack) pays for its filling. */
#define MT_FQT_TOPK_TABLE_MIN 1024

/* MT_ERR_ARG unless the top-k's arguments are valid. */
MT_INLINE mt_status mt_fqt_topk_check(int32_t rows, int32_t channels, const uint8_t *e, const int32_t *list,
                                      const uint8_t *mask, const int32_t *kept)
{
    if (!e || !list || !mask || !kept || channels < 1 || rows < 0) {
        return MT_ERR_ARG;
    }
    return MT_OK;
}

/* |e - z| of one error; int8 errors are compared as e ^ 0x80 with z = 128, i.e. |e|. */
MT_INLINE int32_t mt_fqt_topk_mag1(uint8_t e, int32_t z, int is_signed)
{
    const int32_t v = is_signed ? (int32_t)(int8_t)e : (int32_t)e - z;
    return v < 0 ? -v : v;
}

/* list[c] = sum over the rows of |e - z| by a table of the 256 byte values; the channels done
   (all of them, or none where the errors are too few for the table to pay). */
MT_INLINE int32_t mt_fqt_topk_magnitudes_table(int32_t rows, int32_t channels, int32_t z, int is_signed,
                                               const uint8_t *e, int32_t *list)
{
    uint8_t tab[256];
    int32_t p, c;
    if (rows * channels < MT_FQT_TOPK_TABLE_MIN) {
        return 0;
    }
    for (p = 0; p < 256; ++p) {
        tab[p] = (uint8_t)mt_fqt_topk_mag1((uint8_t)p, z, is_signed);
    }
    for (c = 0; c < channels; ++c) {
        const uint8_t *q = e + c;
        const uint8_t *const end2 = q + (rows & ~1) * channels;
        int32_t m = 0;
        for (; q != end2; q += 2 * channels) {
            m += tab[q[0]];
            m += tab[q[channels]];
        }
        list[c] = m + ((rows & 1) ? tab[*q] : 0);
    }
    return channels;
}

/* list[c] = sum over the rows of |e - z|, for from <= c < channels. */
MT_INLINE void mt_fqt_topk_magnitudes_ref(int32_t from, int32_t rows, int32_t channels, int32_t z, int is_signed,
                                          const uint8_t *e, int32_t *list)
{
    int32_t p, c;
    for (c = from; c < channels; ++c) { /* exact: |e - z| <= 255 per row, rows < 2^23 */
        const uint8_t *q = e + c;
        int32_t m = 0;
        for (p = 0; p < rows; ++p, q += channels) {
            m += mt_fqt_topk_mag1(*q, z, is_signed);
        }
        list[c] = m;
    }
}

/* The errors of every channel c >= from that is not kept set to `fill`. */
MT_INLINE void mt_fqt_topk_prune_ref(int32_t from, int32_t rows, int32_t channels, uint8_t fill, uint8_t *e,
                                     const uint8_t *mask)
{
    int32_t p, c;
    for (c = from; c < channels; ++c) {
        if (!mask[c]) {
            uint8_t *q = e + c;
            for (p = 0; p + 2 <= rows; p += 2, q += 2 * channels) {
                q[0] = fill;
                q[channels] = fill;
            }
            if (p < rows) {
                *q = fill;
            }
        }
    }
}

/* The reference top-k of byte errors (see the file comment). */
MT_INLINE mt_status mt_fqt_topk_bytes_ref(int32_t rows, int32_t channels, int32_t k, int32_t z, int is_signed,
                                          uint8_t *e, int32_t *list, uint8_t *mask, int32_t *kept)
{
    if (mt_fqt_topk_check(rows, channels, e, list, mask, kept) != MT_OK) {
        return MT_ERR_ARG;
    }
    mt_fqt_topk_magnitudes_ref(mt_fqt_topk_magnitudes_table(rows, channels, z, is_signed, e, list), rows, channels,
                               z, is_signed, e, list);
    *kept = mt_fqt_topk_select(channels, k < 0 ? 0 : (k > channels ? channels : k), list, mask);
    mt_fqt_topk_prune_ref(0, rows, channels, (uint8_t)(is_signed ? 0 : z), e, mask);
    return MT_OK;
}

#endif /* MT_FQT_TOPK_REF_H */
