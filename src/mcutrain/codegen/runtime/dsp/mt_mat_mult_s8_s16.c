/*
 * mcutrain runtime: the DSP GEMM core (int8 weight rows times centred int16 columns).
 *
 * Register blocking 2 rows x 2 columns: per group of four k, two weight words are loaded and
 * widened with SXTB16 (4 instructions), the two interleaved columns supply two doublewords,
 * and 8 SMLADs do 16 multiply-accumulates. Accumulators start at the bias; the exporter's bound
 * |bias| + 255 * sum|w| < 2^31 keeps every partial sum in int32.
 *
 * DSP only: nn/mt_mat_mult_s8_s16.c is its empty reference twin, what a build without the DSP
 * twins compiles in its place.
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

/*
 * The 2x2 inner loop over n4 > 0 groups of four k on interleaved columns: s[0..3] (row 0 x A,
 * row 0 x B, row 1 x A, row 1 x B) accumulate onto their initial values.
 * Per group: 2 LDR + 2 LDRD + 4 SXTB16 + 8 SMLAD + loop = 18 instructions for 16 MACs.
 * NOTE: out of line and, on the native core, in assembly: the loop needs exactly the 14
 * registers Thumb-2 has (4 accumulators, 3 pointers, a counter, 6 temporaries), which GCC's
 * allocator does not manage from C without spilling; the C branch is the same computation.
 */
static MT_NOINLINE void dot_2x2(const int8_t *w0, const int8_t *w1, const int16_t *c, int32_t n4, int32_t *s)
{
    int32_t a00 = s[0];
    int32_t a01 = s[1];
    int32_t a10 = s[2];
    int32_t a11 = s[3];
#if defined(MT_DSP_NATIVE)
    int32_t wa, t, x0, x1, y0, y1;
    __asm__ volatile("1:\n\t"
                     "ldr    %[wa], [%[w0]], #4\n\t"
                     "ldrd   %[x0], %[x1], [%[c]], #8\n\t"
                     "ldrd   %[y0], %[y1], [%[c]], #8\n\t"
                     "sxtb16 %[t], %[wa]\n\t"
                     "smlad  %[a00], %[t], %[x0], %[a00]\n\t"
                     "smlad  %[a01], %[t], %[y0], %[a01]\n\t"
                     "sxtb16 %[t], %[wa], ror #8\n\t"
                     "smlad  %[a00], %[t], %[x1], %[a00]\n\t"
                     "smlad  %[a01], %[t], %[y1], %[a01]\n\t"
                     "ldr    %[wa], [%[w1]], #4\n\t"
                     "sxtb16 %[t], %[wa]\n\t"
                     "smlad  %[a10], %[t], %[x0], %[a10]\n\t"
                     "smlad  %[a11], %[t], %[y0], %[a11]\n\t"
                     "sxtb16 %[t], %[wa], ror #8\n\t"
                     "smlad  %[a10], %[t], %[x1], %[a10]\n\t"
                     "smlad  %[a11], %[t], %[y1], %[a11]\n\t"
                     "subs   %[n], %[n], #1\n\t"
                     "bne    1b\n\t"
                     : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [w0] "+r"(w0),
                       [w1] "+r"(w1), [c] "+r"(c), [n] "+r"(n4), [wa] "=&r"(wa), [t] "=&r"(t), [x0] "=&r"(x0),
                       [x1] "=&r"(x1), [y0] "=&r"(y0), [y1] "=&r"(y1)
                     :
                     : "cc", "memory");
#else  /* !MT_DSP_NATIVE: the same loop in C (emulated instructions) */
    while (n4-- > 0) {
        const int32_t wa = mt_read_s8x4(w0);
        const int32_t wb = mt_read_s8x4(w1);
        const int32_t x0 = mt_read_s16x2(c);
        const int32_t x1 = mt_read_s16x2(c + 2);
        const int32_t y0 = mt_read_s16x2(c + 4);
        const int32_t y1 = mt_read_s16x2(c + 6);
        w0 += 4;
        w1 += 4;
        c += 8;
        a00 = mt_smlad(mt_sxtb16(wa), x0, a00);
        a01 = mt_smlad(mt_sxtb16(wa), y0, a01);
        a00 = mt_smlad(mt_sxtb16_ror8(wa), x1, a00);
        a01 = mt_smlad(mt_sxtb16_ror8(wa), y1, a01);
        a10 = mt_smlad(mt_sxtb16(wb), x0, a10);
        a11 = mt_smlad(mt_sxtb16(wb), y0, a11);
        a10 = mt_smlad(mt_sxtb16_ror8(wb), x1, a10);
        a11 = mt_smlad(mt_sxtb16_ror8(wb), y1, a11);
    }
#endif /* MT_DSP_NATIVE */
    s[0] = a00;
    s[1] = a01;
    s[2] = a10;
    s[3] = a11;
}

/*
 * The 1x7 inner loop over n4 > 0 groups of four k: s[j] += w[0..4 n4) . column j (j < 7), the
 * columns interleaved group by group (7 slots, mt_support.h). Per group: 1 LDR + 2 SXTB16 for the
 * weights, 7 LDRD for the columns, 14 SMLAD = 24 instructions for 28 MACs; two groups per loop
 * turn. NOTE: one row against seven columns is the widest block the 14 usable registers hold
 * (7 accumulators, 2 widened weights, 2 column words, 3 pointers/counters); a second row would
 * need 4 more, and any narrower block loads more per MAC (2x2: 16 instructions per 16 MACs).
 */
#define MT_GROUP7                                                                                             \
    "ldr    %[u], [%[w]], #4\n\t"                                                                             \
    "sxtb16 %[t], %[u]\n\t"                                                                                   \
    "sxtb16 %[u], %[u], ror #8\n\t"                                                                           \
    "ldrd   %[x0], %[x1], [%[c]], #8\n\t"                                                                     \
    "smlad  %[a0], %[t], %[x0], %[a0]\n\t"                                                                    \
    "smlad  %[a0], %[u], %[x1], %[a0]\n\t"                                                                    \
    "ldrd   %[x0], %[x1], [%[c]], #8\n\t"                                                                     \
    "smlad  %[a1], %[t], %[x0], %[a1]\n\t"                                                                    \
    "smlad  %[a1], %[u], %[x1], %[a1]\n\t"                                                                    \
    "ldrd   %[x0], %[x1], [%[c]], #8\n\t"                                                                     \
    "smlad  %[a2], %[t], %[x0], %[a2]\n\t"                                                                    \
    "smlad  %[a2], %[u], %[x1], %[a2]\n\t"                                                                    \
    "ldrd   %[x0], %[x1], [%[c]], #8\n\t"                                                                     \
    "smlad  %[a3], %[t], %[x0], %[a3]\n\t"                                                                    \
    "smlad  %[a3], %[u], %[x1], %[a3]\n\t"                                                                    \
    "ldrd   %[x0], %[x1], [%[c]], #8\n\t"                                                                     \
    "smlad  %[a4], %[t], %[x0], %[a4]\n\t"                                                                    \
    "smlad  %[a4], %[u], %[x1], %[a4]\n\t"                                                                    \
    "ldrd   %[x0], %[x1], [%[c]], #8\n\t"                                                                     \
    "smlad  %[a5], %[t], %[x0], %[a5]\n\t"                                                                    \
    "smlad  %[a5], %[u], %[x1], %[a5]\n\t"                                                                    \
    "ldrd   %[x0], %[x1], [%[c]], #8\n\t"                                                                     \
    "smlad  %[a6], %[t], %[x0], %[a6]\n\t"                                                                    \
    "smlad  %[a6], %[u], %[x1], %[a6]\n\t"

static MT_NOINLINE void dot_1x7(const int8_t *w, const int16_t *c, int32_t n4, int32_t bias, int32_t *s)
{
    int32_t a0 = bias;
    int32_t a1 = bias;
    int32_t a2 = bias;
    int32_t a3 = bias;
    int32_t a4 = bias;
    int32_t a5 = bias;
    int32_t a6 = bias;
#if defined(MT_DSP_NATIVE)
    int32_t t, u, x0, x1;
    /* an odd group first (LSRS puts bit 0 in C; the group leaves the flags alone, so Z still
       says whether any pair of groups remains) */
    __asm__ volatile("lsrs   %[n], %[n], #1\n\t"
                     "bcc    2f\n\t" MT_GROUP7 "2:\n\t"
                     "beq    3f\n\t"
                     "1:\n\t" MT_GROUP7 MT_GROUP7 "subs   %[n], %[n], #1\n\t"
                     "bne    1b\n\t"
                     "3:\n\t"
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [a4] "+r"(a4), [a5] "+r"(a5),
                       [a6] "+r"(a6), [w] "+r"(w), [c] "+r"(c), [n] "+r"(n4), [t] "=&r"(t), [u] "=&r"(u),
                       [x0] "=&r"(x0), [x1] "=&r"(x1)
                     :
                     : "cc", "memory");
#else  /* !MT_DSP_NATIVE: the same loop in C (emulated instructions) */
    while (n4-- > 0) {
        const int32_t wv = mt_read_s8x4(w);
        const int32_t t = mt_sxtb16(wv);
        const int32_t u = mt_sxtb16_ror8(wv);
        w += 4;
        a0 = mt_smlad(u, mt_read_s16x2(c + 2), mt_smlad(t, mt_read_s16x2(c), a0));
        a1 = mt_smlad(u, mt_read_s16x2(c + 6), mt_smlad(t, mt_read_s16x2(c + 4), a1));
        a2 = mt_smlad(u, mt_read_s16x2(c + 10), mt_smlad(t, mt_read_s16x2(c + 8), a2));
        a3 = mt_smlad(u, mt_read_s16x2(c + 14), mt_smlad(t, mt_read_s16x2(c + 12), a3));
        a4 = mt_smlad(u, mt_read_s16x2(c + 18), mt_smlad(t, mt_read_s16x2(c + 16), a4));
        a5 = mt_smlad(u, mt_read_s16x2(c + 22), mt_smlad(t, mt_read_s16x2(c + 20), a5));
        a6 = mt_smlad(u, mt_read_s16x2(c + 26), mt_smlad(t, mt_read_s16x2(c + 24), a6));
        c += 28;
    }
#endif /* MT_DSP_NATIVE */
    s[0] = a0;
    s[1] = a1;
    s[2] = a2;
    s[3] = a3;
    s[4] = a4;
    s[5] = a5;
    s[6] = a6;
}

/*
 * Requantize s[0..n) of one output channel into out[j * stride] (j < n): the prepared form where
 * the channel allows it, else the general mt_requantize. Constants come in by value: stores
 * through int8_t pointers may alias anything, so reading them from `q` in the loop would
 * reload them for every output.
 */
void mt_requant_block(const int32_t *s,
                      int32_t n,
                      int32_t mult,
                      int32_t shift,
                      int32_t zp,
                      int32_t act_min,
                      int32_t act_max,
                      int8_t *out,
                      int32_t stride)
{
    int32_t j;
    if (mt_requant_fast_ok(mult, shift)) {
        const int32_t m = mt_requant_mult(mult);
        const int32_t sh = mt_requant_sh(shift);
        const int32_t c1 = mt_requant_c1(sh, zp);
        if (act_min == -128 && act_max == 127) {
            for (j = 0; j < n; j++) {
                out[j * stride] = (int8_t)mt_requantize_fast(s[j], m, sh, c1);
            }
        } else {
            for (j = 0; j < n; j++) {
                int32_t y = mt_requantize_fast(s[j], m, sh, c1);
                y = y < act_min ? act_min : y;
                y = y > act_max ? act_max : y;
                out[j * stride] = (int8_t)y;
            }
        }
    } else {
        for (j = 0; j < n; j++) {
            out[j * stride] = mt_requantize(s[j], mult, shift, zp, act_min, act_max);
        }
    }
}

void mt_mat_mult_s8_s16_7col(const int8_t *w,
                             const int16_t *cols,
                             int32_t rows,
                             int32_t k,
                             const mt_gemm_out *q,
                             int8_t *out,
                             int32_t stride,
                             int32_t n)
{
    const int32_t k4 = k & ~3;
    const int32_t zp = q->zero_point;
    const int32_t act_min = q->act_min;
    const int32_t act_max = q->act_max;
    const int full = n == MT_GEMM_COLS && act_min == -128 && act_max == 127;
    int32_t r;
    for (r = 0; r < rows; r++) {
        const int8_t *wr = w + r * k;
        const int32_t mult = q->multiplier[r];
        const int32_t shift = q->shift[r];
        int32_t s[MT_GEMM_COLS];
        int32_t i, j;
        if (k4 > 0) {
            dot_1x7(wr, cols, k4 >> 2, q->bias[r], s);
        } else {
            for (j = 0; j < MT_GEMM_COLS; j++) {
                s[j] = q->bias[r];
            }
        }
        for (i = k4; i < k; i++) {
            const int32_t wi = wr[i];
            const int16_t *c = cols + MT_GEMM_COLS * i;
            for (j = 0; j < MT_GEMM_COLS; j++) {
                s[j] += wi * c[j];
            }
        }
        if (full && mt_requant_fast_ok(mult, shift)) {
            /* the common case unrolled: 6 instructions per output */
            const int32_t m = mt_requant_mult(mult);
            const int32_t sh = mt_requant_sh(shift);
            const int32_t c1 = mt_requant_c1(sh, zp);
            int8_t *o = out + r;
            o[0] = (int8_t)mt_requantize_fast(s[0], m, sh, c1);
            o[stride] = (int8_t)mt_requantize_fast(s[1], m, sh, c1);
            o[2 * stride] = (int8_t)mt_requantize_fast(s[2], m, sh, c1);
            o[3 * stride] = (int8_t)mt_requantize_fast(s[3], m, sh, c1);
            o[4 * stride] = (int8_t)mt_requantize_fast(s[4], m, sh, c1);
            o[5 * stride] = (int8_t)mt_requantize_fast(s[5], m, sh, c1);
            o[6 * stride] = (int8_t)mt_requantize_fast(s[6], m, sh, c1);
        } else {
            mt_requant_block(s, n, mult, shift, zp, act_min, act_max, out + r, stride);
        }
    }
}

void mt_mat_mult_s8_s16_2col(const int8_t *w,
                             const int16_t *cols,
                             int32_t rows,
                             int32_t k,
                             const mt_gemm_out *q,
                             int8_t *out0,
                             int8_t *out1)
{
    const int32_t k4 = k & ~3;
    const int16_t *tail = cols + 2 * k4; /* pairs (A_t, B_t) */
    const int32_t zp = q->zero_point;
    int32_t r = 0;
    for (; r + 2 <= rows; r += 2) {
        const int8_t *w0 = w + r * k;
        const int8_t *w1 = w0 + k;
        int32_t s[4];
        int32_t i;
        s[0] = q->bias[r];
        s[1] = s[0];
        s[2] = q->bias[r + 1];
        s[3] = s[2];
        if (k4 > 0) {
            dot_2x2(w0, w1, cols, k4 >> 2, s);
        }
        for (i = k4; i < k; i++) {
            const int32_t xa = tail[2 * (i - k4)];
            const int32_t xb = tail[2 * (i - k4) + 1];
            s[0] += w0[i] * xa;
            s[1] += w0[i] * xb;
            s[2] += w1[i] * xa;
            s[3] += w1[i] * xb;
        }
        out0[r] = mt_requantize(s[0], q->multiplier[r], q->shift[r], zp, q->act_min, q->act_max);
        out1[r] = mt_requantize(s[1], q->multiplier[r], q->shift[r], zp, q->act_min, q->act_max);
        out0[r + 1] = mt_requantize(s[2], q->multiplier[r + 1], q->shift[r + 1], zp, q->act_min, q->act_max);
        out1[r + 1] = mt_requantize(s[3], q->multiplier[r + 1], q->shift[r + 1], zp, q->act_min, q->act_max);
    }
    if (r < rows) { /* odd row count: the last row against both columns */
        const int8_t *w0 = w + r * k;
        const int16_t *c = cols;
        int32_t a0 = q->bias[r];
        int32_t a1 = a0;
        int32_t i;
        for (i = 0; i < k4; i += 4) {
            const int32_t wa = mt_read_s8x4(w0 + i);
            const int32_t w02 = mt_sxtb16(wa);
            const int32_t w13 = mt_sxtb16_ror8(wa);
            a0 = mt_smlad(w02, mt_read_s16x2(c), a0);
            a0 = mt_smlad(w13, mt_read_s16x2(c + 2), a0);
            a1 = mt_smlad(w02, mt_read_s16x2(c + 4), a1);
            a1 = mt_smlad(w13, mt_read_s16x2(c + 6), a1);
            c += 8;
        }
        for (i = k4; i < k; i++) {
            a0 += w0[i] * tail[2 * (i - k4)];
            a1 += w0[i] * tail[2 * (i - k4) + 1];
        }
        out0[r] = mt_requantize(a0, q->multiplier[r], q->shift[r], zp, q->act_min, q->act_max);
        out1[r] = mt_requantize(a1, q->multiplier[r], q->shift[r], zp, q->act_min, q->act_max);
    }
}

/*
 * The 4x1 matrix-vector loop over n4 > 0 groups of four k: s[i] += w_i[0..4 n4) . col (i < 4).
 * Per group: 1 LDRD of the column, then per row 1 LDR + 2 SXTB16 + 2 SMLAD = 21 instructions for
 * 16 MACs, plus SUBS + BNE per two groups; every weight is used once, so its load and widening
 * (3 per 4 weights) plus the 2 SMLAD bound any matrix-vector loop at 1.25 instructions per MAC.
 */
#define MT_ROW4(W, A)                                                                                         \
    "ldr    %[u], [%[" W "]], #4\n\t"                                                                        \
    "sxtb16 %[t], %[u]\n\t"                                                                                   \
    "sxtb16 %[u], %[u], ror #8\n\t"                                                                           \
    "smlad  %[" A "], %[t], %[x0], %[" A "]\n\t"                                                              \
    "smlad  %[" A "], %[u], %[x1], %[" A "]\n\t"

/* one group of four k for the four rows */
#define MT_GROUP4x1                                                                                           \
    "ldrd   %[x0], %[x1], [%[c]], #8\n\t" MT_ROW4("w0", "a0") MT_ROW4("w1", "a1") MT_ROW4("w2", "a2")           \
        MT_ROW4("w3", "a3")

static MT_NOINLINE void dot_4x1(const int8_t *w0, int32_t k, const int16_t *c, int32_t n4, int32_t *s)
{
    const int8_t *w1 = w0 + k;
    const int8_t *w2 = w1 + k;
    const int8_t *w3 = w2 + k;
    int32_t a0 = s[0];
    int32_t a1 = s[1];
    int32_t a2 = s[2];
    int32_t a3 = s[3];
#if defined(MT_DSP_NATIVE)
    int32_t t, u, x0, x1;
    /* an odd group first (LSRS puts bit 0 in C; a group leaves the flags alone, so Z still says
       whether any pair of groups remains), then two groups per loop pass */
    __asm__ volatile("lsrs   %[n], %[n], #1\n\t"
                     "bcc    2f\n\t" MT_GROUP4x1 "2:\n\t"
                     "beq    3f\n\t"
                     "1:\n\t" MT_GROUP4x1 MT_GROUP4x1 "subs   %[n], %[n], #1\n\t"
                     "bne    1b\n\t"
                     "3:\n\t"
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [w0] "+r"(w0), [w1] "+r"(w1),
                       [w2] "+r"(w2), [w3] "+r"(w3), [c] "+r"(c), [n] "+r"(n4), [t] "=&r"(t), [u] "=&r"(u),
                       [x0] "=&r"(x0), [x1] "=&r"(x1)
                     :
                     : "cc", "memory");
#else  /* !MT_DSP_NATIVE: the same loop in C (emulated instructions) */
    while (n4-- > 0) {
        const int32_t x0 = mt_read_s16x2(c);
        const int32_t x1 = mt_read_s16x2(c + 2);
        const int32_t v0 = mt_read_s8x4(w0);
        const int32_t v1 = mt_read_s8x4(w1);
        const int32_t v2 = mt_read_s8x4(w2);
        const int32_t v3 = mt_read_s8x4(w3);
        c += 4;
        w0 += 4;
        w1 += 4;
        w2 += 4;
        w3 += 4;
        a0 = mt_smlad(mt_sxtb16_ror8(v0), x1, mt_smlad(mt_sxtb16(v0), x0, a0));
        a1 = mt_smlad(mt_sxtb16_ror8(v1), x1, mt_smlad(mt_sxtb16(v1), x0, a1));
        a2 = mt_smlad(mt_sxtb16_ror8(v2), x1, mt_smlad(mt_sxtb16(v2), x0, a2));
        a3 = mt_smlad(mt_sxtb16_ror8(v3), x1, mt_smlad(mt_sxtb16(v3), x0, a3));
    }
#endif /* MT_DSP_NATIVE */
    s[0] = a0;
    s[1] = a1;
    s[2] = a2;
    s[3] = a3;
}

void mt_mat_mult_s8_s16_1col(const int8_t *w,
                             const int16_t *col,
                             int32_t rows,
                             int32_t k,
                             const mt_gemm_out *q,
                             int8_t *out)
{
    const int32_t k4 = k & ~3;
    const int32_t zp = q->zero_point;
    const int32_t act_min = q->act_min;
    const int32_t act_max = q->act_max;
    int32_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        const int8_t *wr = w + r * k;
        int32_t s[4];
        int32_t i, j;
        for (j = 0; j < 4; j++) {
            s[j] = q->bias[r + j];
        }
        if (k4 > 0) {
            dot_4x1(wr, k, col, k4 >> 2, s);
        }
        for (i = k4; i < k; i++) {
            const int32_t x = col[i];
            for (j = 0; j < 4; j++) {
                s[j] += wr[j * k + i] * x;
            }
        }
        for (j = 0; j < 4; j++) {
            mt_requant_block(&s[j], 1, q->multiplier[r + j], q->shift[r + j], zp, act_min, act_max, out + r + j, 0);
        }
    }
    for (; r < rows; r++) { /* the last rows one at a time */
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
        mt_requant_block(&a0, 1, q->multiplier[r], q->shift[r], zp, act_min, act_max, out + r, 0);
    }
}

#else /* !MT_DSP */

/* ISO C forbids an empty translation unit. */
typedef int mt_mat_mult_s8_s16_unused;

#endif /* MT_DSP */
