/*
 * mcutrain runtime: internal helpers shared by the kernels (not part of the public API).
 *
 * The DSP GEMM works on int16 columns whose elements are already centred (x - z_x, in
 * [-255, 255]) and stored "reordered" in groups of four: (x0, x2, x1, x3). SXTB16 on a word of
 * four int8 weights yields (w0, w2) and SXTB16 ROR #8 yields (w1, w3), so one SMLAD per half
 * multiplies matching pairs without any repacking of the weights. Elements past the last full
 * group of four stay in plain order.
 *
 * N columns (N output pixels: N = 2 or MT_GEMM_COLS) are interleaved group by group, so that one
 * pointer walks them all: for N = 2, [A0 A2 A1 A3][B0 B2 B1 B3][A4 A6 A5 A7][B4 ...] ... then
 * the tail tuples [At Bt] for t >= k4 = k & ~3: element e < k4 of column `slot` (0 = A, 1 = B,
 * ...) sits at 4 * N * (e / 4) + 4 * slot + (0, 2, 1, 3)[e % 4], element e >= k4 at N * e + slot.
 */
#ifndef MT_SUPPORT_H
#define MT_SUPPORT_H

#include <stdint.h>

#include "mt_arch.h"
#include "mt_types.h"

/* Requantization constants of one output row block; shared by the GEMM helpers. */
typedef struct {
    const int32_t *bias;       /* [rows] */
    const int32_t *multiplier; /* [rows] */
    const int32_t *shift;      /* [rows] */
    int32_t zero_point;
    int32_t act_min;
    int32_t act_max;
} mt_gemm_out;

#if MT_DSP

/* Swap elements 1 and 2 of every full group of four (plain order -> SMLAD order). */
void mt_reorder_s16(int16_t *col, int32_t k);

/*
 * Two columns times `rows` weight rows: out0[r] = requant(bias[r] + w[r] . A),
 * out1[r] = requant(bias[r] + w[r] . B). w: [rows, k] int8 row-major; cols: [2 k] int16 in the
 * interleaved layout above, 4-byte aligned. out1 may equal out0 when A and B are the same.
 */
void mt_mat_mult_s8_s16_2col(const int8_t *w,
                             const int16_t *cols,
                             int32_t rows,
                             int32_t k,
                             const mt_gemm_out *q,
                             int8_t *out0,
                             int8_t *out1);

/* Columns per block of the wide GEMM (mt_mat_mult_s8_s16_7col). */
#define MT_GEMM_COLS 7

/*
 * MT_GEMM_COLS columns times `rows` weight rows, one row at a time (1x7 register block):
 * out[j * stride + r] = requant(bias[r] + w[r] . column j) for j < n (n <= MT_GEMM_COLS; the
 * columns from n on are computed but not written). cols: [MT_GEMM_COLS k] int16 interleaved,
 * 4-byte aligned.
 */
void mt_mat_mult_s8_s16_7col(const int8_t *w,
                             const int16_t *cols,
                             int32_t rows,
                             int32_t k,
                             const mt_gemm_out *q,
                             int8_t *out,
                             int32_t stride,
                             int32_t n);

/*
 * The rows of int16 weights (SMLAD order, k a multiple of four, 4-byte aligned) times
 * MT_GEMM_COLS columns: as mt_mat_mult_s8_s16_7col, with no tail (the exporter pads the weights).
 * prep: NULL, or the [rows][4] table of mt_gemm_prepare_s16 when it returned 1 (every row takes
 * the prepared requantization); it is used for full blocks (n == MT_GEMM_COLS).
 */
void mt_mat_mult_s16_s16_7col(const int16_t *w,
                              const int16_t *cols,
                              int32_t rows,
                              int32_t k,
                              const mt_gemm_out *q,
                              const int32_t *prep,
                              int8_t *out,
                              int32_t stride,
                              int32_t n);

/*
 * Per row (bias, multiplier, sh, c1) into prep [rows][4], once per layer call. Returns 1 when
 * every row allows mt_requantize_fast and the clamp is [-128, 127] (prep is then usable), else 0.
 */
int32_t mt_gemm_prepare_s16(const mt_gemm_out *q, int32_t rows, int32_t *prep);

/*
 * Requantize the n sums s[0..n) of one output channel into out[j * stride]: mt_requantize_fast
 * where the channel allows it, else mt_requantize (identical results).
 */
void mt_requant_block(const int32_t *s,
                      int32_t n,
                      int32_t mult,
                      int32_t shift,
                      int32_t zp,
                      int32_t act_min,
                      int32_t act_max,
                      int8_t *out,
                      int32_t stride);

/* One column: out[r] = requant(bias[r] + w[r] . col) (matrix times vector); col plain-reordered. */
void mt_mat_mult_s8_s16_1col(const int8_t *w,
                             const int16_t *col,
                             int32_t rows,
                             int32_t k,
                             const mt_gemm_out *q,
                             int8_t *out);

#endif /* MT_DSP */

#endif /* MT_SUPPORT_H */
