/*
 * mcutrain runtime: the Helium (MVE) switch and the pieces the MVE twins share (not part of the API).
 *
 * MT_MVE is 1 exactly when the compiler targets the M-profile Vector Extension's integer
 * instructions (__ARM_FEATURE_MVE bit 0: Cortex-M55, M85) and the DSP switch of mt_arch.h is on
 * natively (MT_KERNELS_REF, or a host, turns both off). The twins in mve/ are chosen by a build
 * for such a core (codegen/runtime_files.py) in place of the DSP twin or the reference of the
 * same name; with MT_MVE 0 they run the reference body, so a Helium library still builds, and
 * gives the same bits, anywhere.
 *
 * The products are those of the reference: int8 weights times int8 inputs with the input zero
 * point folded into the bias, acc = (bias - z_x * sum(w)) + sum(w * x), exact in int32 because
 * the reference's |bias| + 255 * sum|w| < 2^31 (checked at export) bounds every partial sum
 * modulo 2^32 and the final one exactly; the requantization is the prepared form of
 * mt_fixedpoint.h, four channels per vector, in the library's rounding mode.
 */
#ifndef MT_MVE_H
#define MT_MVE_H

#include <stdint.h>

#include "mt_arch.h"
#include "mt_fixedpoint.h"

#if MT_DSP && defined(MT_DSP_NATIVE) && defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#define MT_MVE 1
#include <arm_mve.h>
#else /* no native DSP or no MVE */
#define MT_MVE 0
#endif /* MT_DSP && MT_DSP_NATIVE && __ARM_FEATURE_MVE */

/* Output channels whose folded biases and requantization constants are prepared at once (on the
   stack: 16 bytes each). */
#define MT_MVE_BLOCK 32

#if MT_MVE

/* One block of output channels ready for the GEMV: folded biases and, with `vec`, the prepared
   requantization constants of mt_fixedpoint.h (multiplier, -sh, c1) of every channel. */
typedef struct {
    int32_t bias[MT_MVE_BLOCK];
    int32_t mult[MT_MVE_BLOCK];
    int32_t nsh[MT_MVE_BLOCK];
    int32_t c1[MT_MVE_BLOCK];
    int vec; /* 1: every channel takes the prepared form; 0: mt_requantize per output */
} mt_mve_block;

/* sum(w[0..k)) of one int8 row, 16 lanes at a time (the tail predicated). */
MT_INLINE int32_t mt_mve_row_sum(const int8_t *w, int32_t k)
{
    int32_t s = 0;
    int32_t g;
    for (g = k >> 4; g > 0; g--, w += 16) {
        s = vaddvaq_s8(s, vldrbq_s8(w));
    }
    if (k & 15) {
        s = vaddvaq_s8(s, vldrbq_z_s8(w, vctp8q((uint32_t)(k & 15))));
    }
    return s;
}

/*
 * Prepare channels o0 .. o0 + nb of a layer (rows of k int8 weights, `row_stride` bytes apart):
 * bias - z_x * sum(w) (wrapping: only the final sum is exact), and the prepared constants when
 * every channel of the block allows them (mt_requant_fast_ok; the clamp is applied after, which
 * composes exactly with the prepared form's [-128, 127]).
 */
MT_INLINE void mt_mve_prepare(mt_mve_block *b,
                              const int8_t *weight,
                              int32_t k,
                              int32_t row_stride,
                              const int32_t *bias,
                              const mt_per_channel_quant *q,
                              int32_t zx,
                              int32_t zy,
                              int32_t o0,
                              int32_t nb)
{
    int32_t i;
    b->vec = 1;
    for (i = nb; i < ((nb + 3) & ~3); i++) { /* the lanes past nb of the last vector: stored never */
        b->bias[i] = b->mult[i] = b->nsh[i] = b->c1[i] = 0;
    }
    for (i = 0; i < nb; i++) {
        const int32_t o = o0 + i;
        const uint32_t ws = (uint32_t)mt_mve_row_sum(weight + o * row_stride, k);
        b->bias[i] = (int32_t)((uint32_t)bias[o] - (uint32_t)zx * ws);
        if (!mt_requant_fast_ok(q->multiplier[o], q->shift[o])) {
            b->vec = 0;
            continue;
        }
        b->mult[i] = q->multiplier[o];
        b->nsh[i] = -mt_requant_sh(q->shift[o]);
        b->c1[i] = mt_requant_c1(mt_requant_sh(q->shift[o]), zy);
    }
}

/* The "single" prepared form of four accumulators, unclamped (see mt_mve_requantize): the forward
   of a "single" library, and FQT's error requantization in either mode. */
MT_INLINE int32x4_t mt_mve_requantize_single(int32x4_t acc, int32x4_t m, int32x4_t nsh, int32x4_t c1, int floor)
{
    int32x4_t h = vmulhq_s32(acc, m);
    if (!floor) {
        mve_pred16_t borrow = vcmpltq_n_s32(acc, 0);
        borrow = vcmpeqq_m_n_s32(vmulq_s32(acc, m), 0, borrow);
        h = vsubq_m_n_s32(h, h, 1, borrow);
    }
    return vshlq_s32(vaddq_s32(h, c1), nsh);
}

/*
 * The prepared requantization of four accumulators (lanes) in the library's mode, clamped to
 * [lo, hi]. "single": floor((acc * m + c1 * 2^32 + [acc < 0]) / 2^(32 + sh)) is
 * (hi32(acc * m) - [acc < 0 and lo32(acc * m) == 0] + c1) >> sh (the -1 borrows from the high
 * word only when the low word is 0). "tflite": VQRDMULH is SaturatingRoundingDoublingHighMul
 * exactly, then (h - [h < 0] + c1) >> r with a saturating add (mt_requantize_fast_tflite).
 * `floor` (output zero point -128) drops the sign corrections as mt_requantize_floor does: they
 * change only results that saturate to -128 anyway.
 */
MT_INLINE int32x4_t mt_mve_requantize(int32x4_t acc, int32x4_t m, int32x4_t nsh, int32x4_t c1, int floor,
                                      int32_t lo, int32_t hi)
{
#if MT_ROUNDING_TFLITE
    int32x4_t h = vqrdmulhq_s32(acc, m);
    if (!floor) {
        h = vaddq_s32(h, vshrq_n_s32(h, 31));
    }
    h = vshlq_s32(vqaddq_s32(h, c1), nsh);
#else  /* !MT_ROUNDING_TFLITE */
    int32x4_t h = mt_mve_requantize_single(acc, m, nsh, c1, floor);
#endif /* MT_ROUNDING_TFLITE */
    return vminq_s32(vmaxq_s32(h, vdupq_n_s32(lo)), vdupq_n_s32(hi));
}

/* The four accumulators a0..a3 as one vector (lane j = a_j). */
MT_INLINE int32x4_t mt_mve_vec4(int32_t a0, int32_t a1, int32_t a2, int32_t a3)
{
    int32x4_t acc = vsetq_lane_s32(a0, vdupq_n_s32(a1), 0);
    acc = vsetq_lane_s32(a2, acc, 2);
    return vsetq_lane_s32(a3, acc, 3);
}

/* Four accumulators (each started at its row's folded bias), requantized, stored as four bytes at
   y (only the first `rows` of them when rows < 4). */
MT_INLINE void mt_mve_store4(int vec,
                             int floor,
                             int32x4_t acc,
                             int32x4_t m,
                             int32x4_t nsh,
                             int32x4_t c1,
                             const mt_per_channel_quant *q,
                             int32_t o,
                             int32_t rows,
                             int32_t zy,
                             int32_t lo,
                             int32_t hi,
                             int8_t *y)
{
    if (vec) {
        const int32x4_t r = mt_mve_requantize(acc, m, nsh, c1, floor, lo, hi);
        if (rows >= 4) {
            vstrbq_s32(y, r);
        } else {
            vstrbq_p_s32(y, r, vctp32q((uint32_t)rows));
        }
    } else {
        int32_t a[4];
        int32_t j;
        vstrwq_s32(a, acc);
        for (j = 0; j < 4 && j < rows; j++) {
            y[j] = mt_requantize(a[j], q->multiplier[o + j], q->shift[o + j], zy, lo, hi);
        }
    }
}

/* Running extremes of `rows` (<= 4) channels widened by the lanes of mn and mx (FQT's ranges). */
MT_INLINE void mt_mve_widen_range(int32x4_t mn, int32x4_t mx, int32_t rows, int32_t *acc_min, int32_t *acc_max)
{
    const mve_pred16_t p = vctp32q((uint32_t)rows);
    vstrwq_p_s32(acc_min, vminq_s32(vldrwq_z_s32(acc_min, p), mn), p);
    vstrwq_p_s32(acc_max, vmaxq_s32(vldrwq_z_s32(acc_max, p), mx), p);
}

/*
 * y[j * y_stride + i] = requant(b->bias[i] + w_i . col_j) for the nb (<= MT_MVE_BLOCK) rows of the
 * block (rows `row_stride` bytes apart, k int8 each) and the ncols columns (col_stride bytes
 * apart, k int8 each: input rows, or im2col columns with z_x in the padding). Four rows at a time
 * against every column, their constants in registers; with k <= 16 the four rows themselves stay
 * in registers too (one load of a column, four VMLADAVA, per column). Lanes past k load 0 from
 * both sides (predicated), so nothing is read beyond a row or a column. With `range` (FQT's
 * forward) acc_min/acc_max [o0 + nb] widen to every accumulator, kept in two vectors per four rows.
 */
MT_INLINE void mt_mve_gemm_body(int vec,
                                int floor,
                                int range,
                                const mt_mve_block *b,
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
    const mve_pred16_t tail = vctp8q((uint32_t)(k & 15));
    int32_t i, j;
    for (i = 0; i < nb; i += 4) {
        const int32_t rows = nb - i < 4 ? nb - i : 4;
        const int8_t *w0 = w + i * row_stride;
        const int8_t *w1 = rows > 1 ? w0 + row_stride : w0;
        const int8_t *w2 = rows > 2 ? w0 + 2 * row_stride : w0;
        const int8_t *w3 = rows > 3 ? w0 + 3 * row_stride : w0;
        const int32x4_t m = vldrwq_s32(b->mult + i);
        const int32x4_t nsh = vldrwq_s32(b->nsh + i);
        const int32x4_t c1 = vldrwq_s32(b->c1 + i);
        const int32_t b0 = b->bias[i], b1 = b->bias[i + 1], b2 = b->bias[i + 2], b3 = b->bias[i + 3];
        int8_t *yo = y + i;
        int32x4_t mn = vdupq_n_s32(INT32_MAX), mx = vdupq_n_s32(INT32_MIN);
        if (k <= 16) {
            /* the four rows once, zero-padded to 16 lanes, one base for all four loads */
            int8_t rows4[64];
            const int8_t *c = cols;
            vstrbq_s8(rows4, vldrbq_z_s8(w0, tail));
            vstrbq_s8(rows4 + 16, vldrbq_z_s8(w1, tail));
            vstrbq_s8(rows4 + 32, vldrbq_z_s8(w2, tail));
            vstrbq_s8(rows4 + 48, vldrbq_z_s8(w3, tail));
            for (j = 0; j < ncols; j++) {
                const int8x16_t x = vldrbq_z_s8(c, tail);
                const int32x4_t acc = mt_mve_vec4(vmladavaq_s8(b0, vldrbq_s8(rows4), x),
                                                  vmladavaq_s8(b1, vldrbq_s8(rows4 + 16), x),
                                                  vmladavaq_s8(b2, vldrbq_s8(rows4 + 32), x),
                                                  vmladavaq_s8(b3, vldrbq_s8(rows4 + 48), x));
                mt_mve_store4(vec, floor, acc, m, nsh, c1, q, o0 + i, rows, zy, lo, hi, yo);
                if (range) {
                    mn = vminq_s32(mn, acc);
                    mx = vmaxq_s32(mx, acc);
                }
                c += col_stride;
                yo += y_stride;
            }
            if (range) {
                mt_mve_widen_range(mn, mx, rows, acc_min + o0 + i, acc_max + o0 + i);
            }
            continue;
        }
        for (j = 0; j < ncols; j++) {
            const int8_t *c = cols + j * col_stride;
            const int8_t *p0 = w0, *p1 = w1, *p2 = w2, *p3 = w3;
            int32_t a0 = b0, a1 = b1, a2 = b2, a3 = b3;
            int32_t g;
            for (g = k >> 4; g > 0; g--) { /* whole groups of 16: no predication */
                const int8x16_t x = vldrbq_s8(c);
                a0 = vmladavaq_s8(a0, vldrbq_s8(p0), x);
                a1 = vmladavaq_s8(a1, vldrbq_s8(p1), x);
                a2 = vmladavaq_s8(a2, vldrbq_s8(p2), x);
                a3 = vmladavaq_s8(a3, vldrbq_s8(p3), x);
                c += 16;
                p0 += 16;
                p1 += 16;
                p2 += 16;
                p3 += 16;
            }
            if (k & 15) {
                const int8x16_t x = vldrbq_z_s8(c, tail);
                a0 = vmladavaq_s8(a0, vldrbq_z_s8(p0, tail), x);
                a1 = vmladavaq_s8(a1, vldrbq_z_s8(p1, tail), x);
                a2 = vmladavaq_s8(a2, vldrbq_z_s8(p2, tail), x);
                a3 = vmladavaq_s8(a3, vldrbq_z_s8(p3, tail), x);
            }
            {
                const int32x4_t acc = mt_mve_vec4(a0, a1, a2, a3);
                mt_mve_store4(vec, floor, acc, m, nsh, c1, q, o0 + i, rows, zy, lo, hi, yo);
                if (range) {
                    mn = vminq_s32(mn, acc);
                    mx = vmaxq_s32(mx, acc);
                }
            }
            yo += y_stride;
        }
        if (range) {
            mt_mve_widen_range(mn, mx, rows, acc_min + o0 + i, acc_max + o0 + i);
        }
    }
}

/* mt_mve_gemm_body with its two requantization switches constant, so each copy keeps only its own
   requantization; `range` is a constant of the caller (mt_mve_gemm.h, mt_mve_range.h). */
MT_INLINE void mt_mve_gemm_modes(int range,
                                 const mt_mve_block *b,
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
    if (b->vec && zy == -128) {
        mt_mve_gemm_body(1, 1, range, b, w, k, row_stride, cols, ncols, col_stride, q, o0, nb, zy, lo, hi, y,
                         y_stride, acc_min, acc_max);
    } else if (b->vec) {
        mt_mve_gemm_body(1, 0, range, b, w, k, row_stride, cols, ncols, col_stride, q, o0, nb, zy, lo, hi, y,
                         y_stride, acc_min, acc_max);
    } else {
        mt_mve_gemm_body(0, 0, range, b, w, k, row_stride, cols, ncols, col_stride, q, o0, nb, zy, lo, hi, y,
                         y_stride, acc_min, acc_max);
    }
}

#endif /* MT_MVE */

#endif /* MT_MVE_H */
