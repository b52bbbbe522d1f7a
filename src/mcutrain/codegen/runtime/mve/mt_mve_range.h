/*
 * mcutrain runtime: the GEMM of the FQT forward on Helium (MVE) cores (not part of the API):
 * mt_mve.h's GEMM, the same products and requantization, with every channel's running accumulator
 * extremes (what fqt._acc_range reads) widened to each accumulator, two vectors per four channels.
 */
#ifndef MT_MVE_RANGE_H
#define MT_MVE_RANGE_H

#include "mt_mve.h"

#if MT_MVE

/* mt_mve_gemm, and acc_min/acc_max [o0 + nb] (in/out) widen to every accumulator of the block. */
static MT_NOINLINE void mt_mve_gemm_range(const mt_mve_block *b,
                                          const int8_t *w,
                                          int32_t k,
                                          int32_t row_stride,
                                          const int8_t *cols,
                                          int32_t ncols,
                                          int32_t col_stride,
                                          const mt_per_channel_quant *q,
                                          int32_t o0,
                                          int32_t nb,
                                          int32_t zy,
                                          int32_t lo,
                                          int32_t hi,
                                          int8_t *y,
                                          int32_t y_stride,
                                          int32_t *acc_min,
                                          int32_t *acc_max)
{
    mt_mve_gemm_modes(1, b, w, k, row_stride, cols, ncols, col_stride, q, o0, nb, zy, lo, hi, y, y_stride, acc_min,
                      acc_max);
}

#endif /* MT_MVE */

#endif /* MT_MVE_RANGE_H */
