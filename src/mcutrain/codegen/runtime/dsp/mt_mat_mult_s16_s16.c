/*
 * mcutrain runtime: the DSP GEMM core for int16 weights (widened at export) times centred int16
 * columns, 1 weight row x 7 columns per register block.
 *
 * Per group of four k: one LDRD brings the row's four weights (already in SMLAD order), seven
 * LDRD the seven columns' four values, 14 SMLAD do 28 MACs: 22 instructions per 28 MACs (the
 * int8-weight block, mt_mat_mult_s8_s16_7col, needs 24: LDR + 2 SXTB16 instead of the LDRD).
 * Accumulators start at the bias; the exporter's bound |bias| + 255 * sum|w| < 2^31 keeps every
 * partial sum in int32.
 *
 * DSP only: nn/mt_mat_mult_s16_s16.c is its empty reference twin, what a build without the DSP
 * twins compiles in its place.
 */
#include "mt_fixedpoint.h"
#include "mt_support.h"

#if MT_DSP

/* one group of four k for the seven columns */
#define MT_GROUP7_S16                                                                                         \
    "ldrd   %[t], %[u], [%[w]], #8\n\t"                                                                       \
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

/* the first group of four k with every accumulator still equal to a0 (the bias): columns 1..6
   use a0 as the addend, column 0 comes last, so no accumulator needs a copy of the bias */
#define MT_GROUP7_S16_FIRST                                                                                   \
    "ldrd   %[t], %[u], [%[w]], #8\n\t"                                                                       \
    "ldrd   %[x0], %[x1], [%[c], #8]\n\t"                                                                     \
    "smlad  %[a1], %[t], %[x0], %[a0]\n\t"                                                                    \
    "smlad  %[a1], %[u], %[x1], %[a1]\n\t"                                                                    \
    "ldrd   %[x0], %[x1], [%[c], #16]\n\t"                                                                    \
    "smlad  %[a2], %[t], %[x0], %[a0]\n\t"                                                                    \
    "smlad  %[a2], %[u], %[x1], %[a2]\n\t"                                                                    \
    "ldrd   %[x0], %[x1], [%[c], #24]\n\t"                                                                    \
    "smlad  %[a3], %[t], %[x0], %[a0]\n\t"                                                                    \
    "smlad  %[a3], %[u], %[x1], %[a3]\n\t"                                                                    \
    "ldrd   %[x0], %[x1], [%[c], #32]\n\t"                                                                    \
    "smlad  %[a4], %[t], %[x0], %[a0]\n\t"                                                                    \
    "smlad  %[a4], %[u], %[x1], %[a4]\n\t"                                                                    \
    "ldrd   %[x0], %[x1], [%[c], #40]\n\t"                                                                    \
    "smlad  %[a5], %[t], %[x0], %[a0]\n\t"                                                                    \
    "smlad  %[a5], %[u], %[x1], %[a5]\n\t"                                                                    \
    "ldrd   %[x0], %[x1], [%[c], #48]\n\t"                                                                    \
    "smlad  %[a6], %[t], %[x0], %[a0]\n\t"                                                                    \
    "smlad  %[a6], %[u], %[x1], %[a6]\n\t"                                                                    \
    "ldrd   %[x0], %[x1], [%[c]], #56\n\t"                                                                    \
    "smlad  %[a0], %[t], %[x0], %[a0]\n\t"                                                                    \
    "smlad  %[a0], %[u], %[x1], %[a0]\n\t"

#if defined(MT_DSP_NATIVE)
/* a0..a6 += row w (n4 groups of four) . the seven columns at c; w, c, n4 are consumed.
   NOTE: out of line, in assembly: the loop needs all 14 registers, which GCC's allocator does
   not manage from C without spilling. An odd group first (LSRS puts bit 0 in C; a group leaves
   the flags alone, so Z still says whether any pair of groups remains). */
#define MT_DOT7_S16(w, c, n4)                                                                                 \
    do {                                                                                                      \
        int32_t t, u, x0, x1;                                                                                 \
        __asm__ volatile("lsrs   %[n], %[n], #1\n\t"                                                           \
                         "bcc    2f\n\t" MT_GROUP7_S16 "2:\n\t"                                               \
                         "beq    3f\n\t"                                                                      \
                         "1:\n\t" MT_GROUP7_S16 MT_GROUP7_S16 "subs   %[n], %[n], #1\n\t"                      \
                         "bne    1b\n\t"                                                                      \
                         "3:\n\t"                                                                             \
                         : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [a4] "+r"(a4),         \
                           [a5] "+r"(a5), [a6] "+r"(a6), [w] "+r"(w), [c] "+r"(c), [n] "+r"(n4),              \
                           [t] "=&r"(t), [u] "=&r"(u), [x0] "=&r"(x0), [x1] "=&r"(x1)                         \
                         :                                                                                    \
                         : "cc", "memory");                                                                   \
    } while (0)
/* The same with a1..a6 undefined on entry and a0 the bias, n4 >= 1: the first group peeled, then
   bit 0 and bit 1 of the remaining count (one group, two groups; LSRS leaves them in C and the
   groups leave the flags alone), then four groups per loop pass (one SUBS + BNE per 112 MACs). */
#define MT_DOT7_S16_FROM_BIAS(w, c, n4)                                                                       \
    do {                                                                                                      \
        int32_t t, u, x0, x1;                                                                                 \
        __asm__ volatile(MT_GROUP7_S16_FIRST "subs   %[n], %[n], #1\n\t"                                       \
                         "lsrs   %[n], %[n], #1\n\t"                                                           \
                         "bcc    2f\n\t" MT_GROUP7_S16 "2:\n\t"                                               \
                         "lsrs   %[n], %[n], #1\n\t"                                                           \
                         "bcc    4f\n\t" MT_GROUP7_S16 MT_GROUP7_S16 "4:\n\t"                                 \
                         "beq    3f\n\t"                                                                      \
                         "1:\n\t" MT_GROUP7_S16 MT_GROUP7_S16 MT_GROUP7_S16 MT_GROUP7_S16                     \
                         "subs   %[n], %[n], #1\n\t"                                                           \
                         "bne    1b\n\t"                                                                      \
                         "3:\n\t"                                                                             \
                         : [a0] "+r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [a4] "=&r"(a4),     \
                           [a5] "=&r"(a5), [a6] "=&r"(a6), [w] "+r"(w), [c] "+r"(c), [n] "+r"(n4),            \
                           [t] "=&r"(t), [u] "=&r"(u), [x0] "=&r"(x0), [x1] "=&r"(x1)                         \
                         :                                                                                    \
                         : "cc", "memory");                                                                   \
    } while (0)
#else /* !MT_DSP_NATIVE: the same loop in C (emulated instructions) */
#define MT_DOT7_S16_FROM_BIAS(w, c, n4)                                                                       \
    do {                                                                                                      \
        a1 = a2 = a3 = a4 = a5 = a6 = a0;                                                                     \
        MT_DOT7_S16(w, c, n4);                                                                                \
    } while (0)
#define MT_DOT7_S16(w, c, n4)                                                                                 \
    do {                                                                                                      \
        while ((n4)-- > 0) {                                                                                  \
            const int32_t t = mt_read_s16x2(w);                                                               \
            const int32_t u = mt_read_s16x2((w) + 2);                                                         \
            (w) += 4;                                                                                         \
            a0 = mt_smlad(u, mt_read_s16x2((c) + 2), mt_smlad(t, mt_read_s16x2(c), a0));                      \
            a1 = mt_smlad(u, mt_read_s16x2((c) + 6), mt_smlad(t, mt_read_s16x2((c) + 4), a1));                \
            a2 = mt_smlad(u, mt_read_s16x2((c) + 10), mt_smlad(t, mt_read_s16x2((c) + 8), a2));               \
            a3 = mt_smlad(u, mt_read_s16x2((c) + 14), mt_smlad(t, mt_read_s16x2((c) + 12), a3));              \
            a4 = mt_smlad(u, mt_read_s16x2((c) + 18), mt_smlad(t, mt_read_s16x2((c) + 16), a4));              \
            a5 = mt_smlad(u, mt_read_s16x2((c) + 22), mt_smlad(t, mt_read_s16x2((c) + 20), a5));              \
            a6 = mt_smlad(u, mt_read_s16x2((c) + 26), mt_smlad(t, mt_read_s16x2((c) + 24), a6));              \
            (c) += 28;                                                                                        \
        }                                                                                                     \
    } while (0)
#endif /* MT_DSP_NATIVE */

/*
 * rows > 0 rows against the seven columns, each requantized by the prepared form into
 * out[r + j * stride]: prep = (bias, multiplier, sh, c1) per row (mt_fixedpoint.h). Only what the
 * loop cannot hold in registers waits on the stack; the weights pointer runs on from row to row.
 */
static MT_NOINLINE void rows_fast(const int16_t *w,
                                  const int16_t *cols,
                                  int32_t n4,
                                  const int32_t *prep,
                                  int8_t *out,
                                  int32_t stride,
                                  int32_t rows)
{
    do {
        const int16_t *c = cols;
        int32_t n = n4;
        int32_t a0 = prep[0];
        int32_t a1, a2, a3, a4, a5, a6;
        int32_t mult, sh, c1;
        int8_t *o = out;
        MT_DOT7_S16_FROM_BIAS(w, c, n);
#if defined(__GNUC__)
        /* NOTE: hides o's relation to the previous row's, or GCC keeps seven output pointers
           (o + j * stride) on the stack and updates each of them per row */
        __asm__("" : "+r"(o));
#endif /* __GNUC__ */
        mult = prep[1];
        sh = prep[2];
        c1 = prep[3];
        o[0] = (int8_t)mt_requantize_fast(a0, mult, sh, c1);
        o[stride] = (int8_t)mt_requantize_fast(a1, mult, sh, c1);
        o[2 * stride] = (int8_t)mt_requantize_fast(a2, mult, sh, c1);
        o[3 * stride] = (int8_t)mt_requantize_fast(a3, mult, sh, c1);
        o[4 * stride] = (int8_t)mt_requantize_fast(a4, mult, sh, c1);
        o[5 * stride] = (int8_t)mt_requantize_fast(a5, mult, sh, c1);
        o[6 * stride] = (int8_t)mt_requantize_fast(a6, mult, sh, c1);
        prep += 4;
        out++;
    } while (--rows > 0);
}

/* One row against the seven columns: the sums s[0..7) (any requantization). */
static MT_NOINLINE void row_sums(const int16_t *w, const int16_t *c, int32_t n4, int32_t bias, int32_t *s)
{
    int32_t a0 = bias;
    int32_t a1 = bias;
    int32_t a2 = bias;
    int32_t a3 = bias;
    int32_t a4 = bias;
    int32_t a5 = bias;
    int32_t a6 = bias;
    MT_DOT7_S16(w, c, n4);
    s[0] = a0;
    s[1] = a1;
    s[2] = a2;
    s[3] = a3;
    s[4] = a4;
    s[5] = a5;
    s[6] = a6;
}

int32_t mt_gemm_prepare_s16(const mt_gemm_out *q, int32_t rows, int32_t *prep)
{
    int32_t r;
    int fast = q->act_min == -128 && q->act_max == 127;
    for (r = 0; r < rows; r++) {
        const int32_t sh = mt_requant_sh(q->shift[r]);
        fast = fast && mt_requant_fast_ok(q->multiplier[r], q->shift[r]);
        prep[4 * r] = q->bias[r];
        prep[4 * r + 1] = mt_requant_mult(q->multiplier[r]);
        prep[4 * r + 2] = sh;
        prep[4 * r + 3] = fast ? mt_requant_c1(sh, q->zero_point) : 0;
    }
    return fast;
}

void mt_mat_mult_s16_s16_7col(const int16_t *w,
                              const int16_t *cols,
                              int32_t rows,
                              int32_t k,
                              const mt_gemm_out *q,
                              const int32_t *prep,
                              int8_t *out,
                              int32_t stride,
                              int32_t n)
{
    int32_t r;
    if (prep && n == MT_GEMM_COLS && rows > 0 && k >= 4) {
        rows_fast(w, cols, k >> 2, prep, out, stride, rows);
        return;
    }
    for (r = 0; r < rows; r++) {
        int32_t s[MT_GEMM_COLS];
        row_sums(w + r * k, cols, k >> 2, q->bias[r], s);
        mt_requant_block(s, n, q->multiplier[r], q->shift[r], q->zero_point, q->act_min, q->act_max, out + r,
                         stride);
    }
}

#else /* !MT_DSP */

/* ISO C forbids an empty translation unit. */
typedef int mt_mat_mult_s16_s16_unused;

#endif /* MT_DSP */
