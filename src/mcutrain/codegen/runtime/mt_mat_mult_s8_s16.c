/*
 * mcutrain runtime: the DSP GEMM core (int8 weight rows times centred int16 columns).
 *
 * Register blocking 2 rows x 2 columns: per group of four k, two weight words are loaded and
 * widened with SXTB16 (4 instructions), each column supplies two words, and 8 SMLADs do 16
 * multiply-accumulates. Accumulators start at the bias; the exporter's bound
 * |bias| + 255 * sum|w| < 2^31 keeps every partial sum in int32.
 */
#include "mt_fixedpoint.h"
#include "mt_support.h"

#if MT_DSP

void mt_reorder_s16(int16_t *col, int32_t k)
{
    int32_t i;
    for (i = 0; i + 4 <= k; i += 4) {
        const int16_t t = col[i + 1];
        col[i + 1] = col[i + 2];
        col[i + 2] = t;
    }
}

void mt_mat_mult_s8_s16_2col(const int8_t *w,
                             const int16_t *col0,
                             const int16_t *col1,
                             int32_t rows,
                             int32_t k,
                             const mt_gemm_out *q,
                             int8_t *out0,
                             int8_t *out1)
{
    const int32_t k4 = k & ~3;
    int32_t r = 0;
    for (; r + 2 <= rows; r += 2) {
        const int8_t *w0 = w + r * k;
        const int8_t *w1 = w0 + k;
        const int16_t *c0 = col0;
        const int16_t *c1 = col1;
        int32_t a00 = q->bias[r];
        int32_t a01 = a00;
        int32_t a10 = q->bias[r + 1];
        int32_t a11 = a10;
        int32_t i;
        for (i = 0; i < k4; i += 4) {
            const int32_t wa = mt_read_s8x4(w0);
            const int32_t wb = mt_read_s8x4(w1);
            const int32_t wa02 = mt_sxtb16(wa);
            const int32_t wa13 = mt_sxtb16_ror8(wa);
            const int32_t wb02 = mt_sxtb16(wb);
            const int32_t wb13 = mt_sxtb16_ror8(wb);
            const int32_t x002 = mt_read_s16x2(c0);
            const int32_t x013 = mt_read_s16x2(c0 + 2);
            const int32_t x102 = mt_read_s16x2(c1);
            const int32_t x113 = mt_read_s16x2(c1 + 2);
            w0 += 4;
            w1 += 4;
            c0 += 4;
            c1 += 4;
            a00 = mt_smlad(wa02, x002, a00);
            a00 = mt_smlad(wa13, x013, a00);
            a01 = mt_smlad(wa02, x102, a01);
            a01 = mt_smlad(wa13, x113, a01);
            a10 = mt_smlad(wb02, x002, a10);
            a10 = mt_smlad(wb13, x013, a10);
            a11 = mt_smlad(wb02, x102, a11);
            a11 = mt_smlad(wb13, x113, a11);
        }
        for (; i < k; i++) {
            const int32_t x0 = *c0++;
            const int32_t x1 = *c1++;
            const int32_t wv0 = *w0++;
            const int32_t wv1 = *w1++;
            a00 += wv0 * x0;
            a01 += wv0 * x1;
            a10 += wv1 * x0;
            a11 += wv1 * x1;
        }
        out0[r] = mt_requantize(a00, q->multiplier[r], q->shift[r], q->zero_point, q->act_min, q->act_max);
        out1[r] = mt_requantize(a01, q->multiplier[r], q->shift[r], q->zero_point, q->act_min, q->act_max);
        out0[r + 1] =
            mt_requantize(a10, q->multiplier[r + 1], q->shift[r + 1], q->zero_point, q->act_min, q->act_max);
        out1[r + 1] =
            mt_requantize(a11, q->multiplier[r + 1], q->shift[r + 1], q->zero_point, q->act_min, q->act_max);
    }
    if (r < rows) { /* odd row count: the last row against both columns */
        const int8_t *w0 = w + r * k;
        const int16_t *c0 = col0;
        const int16_t *c1 = col1;
        int32_t a00 = q->bias[r];
        int32_t a01 = a00;
        int32_t i;
        for (i = 0; i < k4; i += 4) {
            const int32_t wa = mt_read_s8x4(w0);
            const int32_t wa02 = mt_sxtb16(wa);
            const int32_t wa13 = mt_sxtb16_ror8(wa);
            a00 = mt_smlad(wa02, mt_read_s16x2(c0), a00);
            a00 = mt_smlad(wa13, mt_read_s16x2(c0 + 2), a00);
            a01 = mt_smlad(wa02, mt_read_s16x2(c1), a01);
            a01 = mt_smlad(wa13, mt_read_s16x2(c1 + 2), a01);
            w0 += 4;
            c0 += 4;
            c1 += 4;
        }
        for (; i < k; i++) {
            const int32_t wv0 = *w0++;
            a00 += wv0 * *c0++;
            a01 += wv0 * *c1++;
        }
        out0[r] = mt_requantize(a00, q->multiplier[r], q->shift[r], q->zero_point, q->act_min, q->act_max);
        out1[r] = mt_requantize(a01, q->multiplier[r], q->shift[r], q->zero_point, q->act_min, q->act_max);
    }
}

void mt_mat_mult_s8_s16_1col(const int8_t *w,
                             const int16_t *col,
                             int32_t rows,
                             int32_t k,
                             const mt_gemm_out *q,
                             int8_t *out)
{
    const int32_t k4 = k & ~3;
    int32_t r = 0;
    for (; r + 2 <= rows; r += 2) {
        const int8_t *w0 = w + r * k;
        const int8_t *w1 = w0 + k;
        const int16_t *c = col;
        int32_t a0 = q->bias[r];
        int32_t a1 = q->bias[r + 1];
        int32_t i;
        for (i = 0; i < k4; i += 4) {
            const int32_t wa = mt_read_s8x4(w0);
            const int32_t wb = mt_read_s8x4(w1);
            const int32_t x02 = mt_read_s16x2(c);
            const int32_t x13 = mt_read_s16x2(c + 2);
            w0 += 4;
            w1 += 4;
            c += 4;
            a0 = mt_smlad(mt_sxtb16(wa), x02, a0);
            a0 = mt_smlad(mt_sxtb16_ror8(wa), x13, a0);
            a1 = mt_smlad(mt_sxtb16(wb), x02, a1);
            a1 = mt_smlad(mt_sxtb16_ror8(wb), x13, a1);
        }
        for (; i < k; i++) {
            const int32_t x = *c++;
            a0 += *w0++ * x;
            a1 += *w1++ * x;
        }
        out[r] = mt_requantize(a0, q->multiplier[r], q->shift[r], q->zero_point, q->act_min, q->act_max);
        out[r + 1] =
            mt_requantize(a1, q->multiplier[r + 1], q->shift[r + 1], q->zero_point, q->act_min, q->act_max);
    }
    if (r < rows) {
        const int8_t *w0 = w + r * k;
        const int16_t *c = col;
        int32_t a0 = q->bias[r];
        int32_t i;
        for (i = 0; i < k4; i += 4) {
            const int32_t wa = mt_read_s8x4(w0);
            a0 = mt_smlad(mt_sxtb16(wa), mt_read_s16x2(c), a0);
            a0 = mt_smlad(mt_sxtb16_ror8(wa), mt_read_s16x2(c + 2), a0);
            w0 += 4;
            c += 4;
        }
        for (; i < k; i++) {
            a0 += *w0++ * *c++;
        }
        out[r] = mt_requantize(a0, q->multiplier[r], q->shift[r], q->zero_point, q->act_min, q->act_max);
    }
}

#else /* !MT_DSP */

/* ISO C forbids an empty translation unit. */
typedef int mt_mat_mult_s8_s16_unused;

#endif /* MT_DSP */
