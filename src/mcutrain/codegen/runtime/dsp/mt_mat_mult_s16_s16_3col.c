/*
 * mcutrain runtime: the GEMM of mt_conv2d_fwd_s8_s16's general path, 2 weight rows x 3 columns
 * per register block, int16 weights (widened at export) times centred int16 columns.
 *
 * Why this block: per pair of k, one LDRD brings both rows' weight pairs (the exporter
 * interleaves the rows of each pair word by word), one LDM the three columns' pairs (the
 * im2col interleaves the columns word by word) and six SMLAD do 12 MACs: 8 instructions per
 * 12 MACs (0.67 per MAC; the 1x7 block it replaces needed 22 per 28, 0.79). The loop holds 6
 * accumulators, 3 column words, 2 weight words, 2 pointers and a counter: all 14 registers,
 * in a fixed order because LDM loads in register order; so it is a naked function in
 * assembly, which also requantizes the block's six outputs (mt_requantize_floor, or
 * mt_requantize_fast when the zero point is not -128) without leaving it.
 *
 * Accumulators start at the bias; the exporter's bound |bias| + 255 * sum|w| < 2^31 keeps
 * every partial sum in int32.
 *
 * DSP only: nn/mt_mat_mult_s16_s16_3col.c is its empty reference twin, what a build without the DSP
 * twins compiles in its place.
 */
#include "mt_conv_s16.h"
#include "mt_fixedpoint.h"

#if MT_DSP

int mt_gemm3_prepare(const mt_gemm_out *q, int32_t rows, int32_t *prep)
{
    int32_t r;
    int fast = q->act_min == -128 && q->act_max == 127;
    for (r = 0; r < rows; r++) {
        fast = fast && mt_requant_fast_ok(q->multiplier[r], q->shift[r]);
    }
    if (!fast) {
        return 0;
    }
    for (r = 0; r + 2 <= rows; r += 2) {
        int32_t h;
        prep[0] = q->bias[r];
        prep[1] = q->bias[r + 1];
        for (h = 0; h < 2; h++) {
            const int32_t sh = mt_requant_sh(q->shift[r + h]);
            prep[2 + 3 * h] = mt_requant_mult(q->multiplier[r + h]);
            prep[3 + 3 * h] = mt_requant_c1(sh, q->zero_point);
            prep[4 + 3 * h] = sh;
        }
        prep += 8;
    }
    if (r < rows) { /* the odd last row */
        const int32_t sh = mt_requant_sh(q->shift[r]);
        prep[0] = q->bias[r];
        prep[1] = mt_requant_mult(q->multiplier[r]);
        prep[2] = mt_requant_c1(sh, q->zero_point);
        prep[3] = sh;
    }
    return q->zero_point == -128 ? 1 : 2;
}

/* The arguments of one block beyond the four that travel in registers. */
typedef struct {
    int32_t stride;    /* bytes from one output pixel to the next */
    int32_t pairs;     /* pairs of k per row (k / 2 >= 1) */
    int32_t row_pairs; /* >= 1 */
} block_args;

#if defined(MT_DSP_NATIVE)

/* One pair of k: both rows' weight pairs (r9, r10), the three columns' pairs (r6-r8), 6 SMLAD
   into r0-r2 (row 0) and r3-r5 (row 1). Weights at r11, columns at r12. */
#define MT_PAIR3                                                                                              \
    "ldrd  r9, r10, [r11], #8\n\t"                                                                            \
    "ldm   r12!, {r6, r7, r8}\n\t"                                                                            \
    "smlad r0, r9, r6, r0\n\t"                                                                                \
    "smlad r1, r9, r7, r1\n\t"                                                                                \
    "smlad r2, r9, r8, r2\n\t"                                                                                \
    "smlad r3, r10, r6, r3\n\t"                                                                               \
    "smlad r4, r10, r7, r4\n\t"                                                                               \
    "smlad r5, r10, r8, r5\n\t"

/* The first pair with r0 and r3 holding the biases: the other accumulators start from them, so
   no copies are needed (the bias columns come last). */
#define MT_PAIR3_FIRST                                                                                        \
    "ldrd  r9, r10, [r11], #8\n\t"                                                                            \
    "ldm   r12!, {r6, r7, r8}\n\t"                                                                            \
    "smlad r1, r9, r7, r0\n\t"                                                                                \
    "smlad r2, r9, r8, r0\n\t"                                                                                \
    "smlad r0, r9, r6, r0\n\t"                                                                                \
    "smlad r4, r10, r7, r3\n\t"                                                                               \
    "smlad r5, r10, r8, r3\n\t"                                                                               \
    "smlad r3, r10, r6, r3\n\t"

#define MT_PAIR3_X2 MT_PAIR3 MT_PAIR3
#define MT_PAIR3_X4 MT_PAIR3_X2 MT_PAIR3_X2
#define MT_PAIR3_X8 MT_PAIR3_X4 MT_PAIR3_X4
#define MT_PAIR3_X16 MT_PAIR3_X8 MT_PAIR3_X8

/* Requantize accumulator A into the byte at DST (the library's mode, mt_fixedpoint.h): prepared m in
   r6, c1 in r7, sh in r8; r9, r10 scratch. */
#define MT_REQ_FLOOR(A, DST) MT_ASM_REQUANT_FLOOR("r10", "r9", A, "r6", "r7", "r8") "strb  r10, " DST "\n\t"

#define MT_REQ_FAST(A, DST) MT_ASM_REQUANT_FAST("r10", "r9", A, "r6", "r7", "r8") "strb  r10, " DST "\n\t"

/*
 * block(w, cols, prep, out, args): every row pair against the three columns. Stack frame after
 * the pushes: [sp] cols, [sp, #4] prep, [sp, #8] out, [sp, #12] stride, [sp, #16] pairs,
 * [sp, #20] row pairs left. Per row pair: the biases, the first pair peeled, then bits 0 to 3
 * of the remaining count (LSRS leaves them in C; the pairs leave the flags alone, so after the
 * last LSRS Z says whether a pass of sixteen remains), sixteen pairs per loop pass, then
 * the six outputs: (r0, r1, r2) of row 0 to out, out + stride, out + 2 stride, (r3, r4, r5) of
 * row 1 one byte further.
 */
#define MT_BLOCK3(REQ)                                                                                        \
    __asm__ volatile("push  {r4-r11, lr}\n\t"                                                                  \
                     "sub   sp, sp, #24\n\t"                                                                   \
                     "strd  r1, r2, [sp]\n\t"                                                                  \
                     "str   r3, [sp, #8]\n\t"                                                                  \
                     "ldr   r12, [sp, #60]\n\t"                                                                \
                     "ldm   r12, {r4, r5, r6}\n\t"                                                             \
                     "add   r12, sp, #12\n\t"                                                                  \
                     "stm   r12, {r4, r5, r6}\n\t"                                                             \
                     "mov   r11, r0\n\t"                                                                       \
                     "1:\n\t"                                                                                  \
                     "ldr   r12, [sp, #4]\n\t"                                                                 \
                     "ldm   r12!, {r0, r3}\n\t"                                                                \
                     "str   r12, [sp, #4]\n\t"                                                                 \
                     "ldr   r12, [sp]\n\t"                                                                     \
                     "ldr   lr, [sp, #16]\n\t" MT_PAIR3_FIRST "subs  lr, lr, #1\n\t"                           \
                     "lsrs  lr, lr, #1\n\t"                                                                    \
                     "bcc   2f\n\t" MT_PAIR3 "2:\n\t"                                                          \
                     "lsrs  lr, lr, #1\n\t"                                                                    \
                     "bcc   3f\n\t" MT_PAIR3_X2 "3:\n\t"                                                       \
                     "lsrs  lr, lr, #1\n\t"                                                                    \
                     "bcc   4f\n\t" MT_PAIR3_X4 "4:\n\t"                                                       \
                     "lsrs  lr, lr, #1\n\t"                                                                    \
                     "bcc   7f\n\t" MT_PAIR3_X8 "7:\n\t"                                                       \
                     "beq   6f\n\t"                                                                            \
                     "5:\n\t" MT_PAIR3_X16 "subs  lr, lr, #1\n\t"                                              \
                     "bne   5b\n\t"                                                                            \
                     "6:\n\t"                                                                                  \
                     "ldr   r12, [sp, #4]\n\t"                                                                 \
                     "ldm   r12!, {r6, r7, r8}\n\t"                                                            \
                     "ldr   lr, [sp, #8]\n\t" REQ("r0", "[lr]") "ldr   r0, [sp, #12]\n\t" REQ("r1", "[lr, r0]") \
                     "add   r1, lr, r0\n\t" REQ("r2", "[r1, r0]") "ldm   r12!, {r6, r7, r8}\n\t"                 \
                     "str   r12, [sp, #4]\n\t" REQ("r3", "[lr, #1]") "add   r2, lr, #1\n\t"                   \
                     REQ("r4", "[r2, r0]") "add   r2, r1, #1\n\t" REQ("r5", "[r2, r0]")                      \
                     "add   lr, lr, #2\n\t"                                                                    \
                     "str   lr, [sp, #8]\n\t"                                                                  \
                     "ldr   r12, [sp, #20]\n\t"                                                                \
                     "subs  r12, r12, #1\n\t"                                                                  \
                     "str   r12, [sp, #20]\n\t"                                                                \
                     "bne   1b\n\t"                                                                            \
                     "add   sp, sp, #24\n\t"                                                                   \
                     "pop   {r4-r11, pc}\n\t")

/* the arguments arrive in r0-r3 and on the stack (AAPCS); a naked function never names them */
#define MT_BLOCK_ARGS                                                                                         \
    const int16_t *w __attribute__((unused)), const int32_t *cols __attribute__((unused)),                    \
        const int32_t *prep __attribute__((unused)), int8_t *out __attribute__((unused)),                     \
        const block_args *a __attribute__((unused))

__attribute__((naked, noinline)) static void block_floor(MT_BLOCK_ARGS)
{
    MT_BLOCK3(MT_REQ_FLOOR);
}

__attribute__((naked, noinline)) static void block_fast(MT_BLOCK_ARGS)
{
    MT_BLOCK3(MT_REQ_FAST);
}

#else /* !MT_DSP_NATIVE: the same computation in C (emulated instructions) */

static void block_c(const int16_t *w, const int32_t *cols, const int32_t *prep, int8_t *out, const block_args *a,
                    int floor_mode)
{
    int32_t rp, p, j, h;
    for (rp = 0; rp < a->row_pairs; rp++) {
        int32_t s[2][3];
        const int32_t *c = cols;
        for (h = 0; h < 2; h++) {
            for (j = 0; j < 3; j++) {
                s[h][j] = prep[h];
            }
        }
        for (p = 0; p < a->pairs; p++) {
            const int32_t w0 = mt_read_s16x2(w);
            const int32_t w1 = mt_read_s16x2(w + 2);
            for (j = 0; j < 3; j++) {
                s[0][j] = mt_smlad(w0, c[j], s[0][j]);
                s[1][j] = mt_smlad(w1, c[j], s[1][j]);
            }
            w += 4;
            c += 3;
        }
        for (h = 0; h < 2; h++) {
            const int32_t *k = prep + 2 + 3 * h;
            for (j = 0; j < 3; j++) {
                out[j * a->stride + h] = (int8_t)(floor_mode ? mt_requantize_floor(s[h][j], k[0], k[2], k[1])
                                                             : mt_requantize_fast(s[h][j], k[0], k[2], k[1]));
            }
        }
        prep += 8;
        out += 2;
    }
}

static void block_floor(const int16_t *w, const int32_t *cols, const int32_t *prep, int8_t *out, const block_args *a)
{
    block_c(w, cols, prep, out, a, 1);
}

static void block_fast(const int16_t *w, const int32_t *cols, const int32_t *prep, int8_t *out, const block_args *a)
{
    block_c(w, cols, prep, out, a, 0);
}

#endif /* MT_DSP_NATIVE */

/* One row (not interleaved) against the three columns: the sums s[0..3). */
static void row_sums(const int16_t *w, const int32_t *cols, int32_t pairs, int32_t bias, int32_t *s)
{
    int32_t p;
    s[0] = s[1] = s[2] = bias;
    for (p = 0; p < pairs; p++) {
        const int32_t wv = mt_read_s16x2(w + 2 * p);
        s[0] = mt_smlad(wv, cols[3 * p], s[0]);
        s[1] = mt_smlad(wv, cols[3 * p + 1], s[1]);
        s[2] = mt_smlad(wv, cols[3 * p + 2], s[2]);
    }
}

void mt_gemm3(const int16_t *w,
              const int32_t *cols,
              int32_t rows,
              int32_t k,
              const mt_gemm_out *q,
              const int32_t *prep,
              int mode,
              int8_t *out,
              int32_t stride)
{
    const int32_t pairs = k >> 1;
    int32_t r = 0, j, h;
    if (mode != 0 && rows >= 2) {
        block_args a;
        a.stride = stride;
        a.pairs = pairs;
        a.row_pairs = rows >> 1;
        (mode == 1 ? block_floor : block_fast)(w, cols, prep, out, &a);
        r = rows & ~1;
    }
    for (; r < rows; r++) {
        /* the general requantization, or the odd last row (stored alone after the pairs) */
        const int odd = r == (rows & ~1);
        const int16_t *wr = odd ? w + r * k : w + (r & ~1) * k;
        int32_t s[3];
        if (odd) {
            row_sums(wr, cols, pairs, q->bias[r], s);
        } else {
            /* row r of an interleaved pair: its pairs are every other word */
            int32_t p;
            s[0] = s[1] = s[2] = q->bias[r];
            for (p = 0; p < pairs; p++) {
                const int32_t wv = mt_read_s16x2(wr + 4 * p + 2 * (r & 1));
                for (h = 0; h < 3; h++) {
                    s[h] = mt_smlad(wv, cols[3 * p + h], s[h]);
                }
            }
        }
        for (j = 0; j < 3; j++) {
            out[j * stride + r] = mt_requantize(s[j], q->multiplier[r], q->shift[r], q->zero_point, q->act_min,
                                                q->act_max);
        }
    }
}

#else /* !MT_DSP */

/* ISO C forbids an empty translation unit. */
typedef int mt_mat_mult_s16_s16_3col_unused;

#endif /* MT_DSP */
