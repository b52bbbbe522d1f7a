/*
 * mcutrain runtime: the GEMM of inference on Helium (MVE) cores (not part of the API), one out-of-
 * line copy of mt_mve.h's GEMM per requantization form, without the FQT extremes (those are
 * mt_mve_range.h's). Its own header so that a unit includes only the GEMM it calls.
 */
#ifndef MT_MVE_GEMM_H
#define MT_MVE_GEMM_H

#include "mt_mve.h"

#if MT_MVE

/* The GEMM of inference: mt_mve_gemm_body without extremes. */
static MT_NOINLINE void mt_mve_gemm(const mt_mve_block *b,
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
                                    int32_t y_stride)
{
    mt_mve_gemm_modes(0, b, w, k, row_stride, cols, ncols, col_stride, q, o0, nb, zy, lo, hi, y, y_stride, 0, 0);
}

#endif /* MT_MVE */

#endif /* MT_MVE_GEMM_H */
