/*
 * mcutrain runtime: mt_linear_fwd_s8_rows4, the fully connected layer with its frozen weights
 * stored four rows interleaved (see mt_nn.h for the layout).
 *
 * Why: a matrix-vector product uses every weight once, so its loads cannot be amortized; what
 * can shrink is their count. With rows 4b .. 4b + 3 interleaved word by word, one LDM brings
 * sixteen weights (four of each row) and one LDRD the four matching centred inputs: per four
 * k, LDRD + LDM + 8 SXTB16 + 8 SMLAD = 18 instructions for 16 MACs (1.125 per MAC), where
 * separate rows need an LDR per row (21 per 16, mt_mat_mult_s8_s16_1col). The layout is only a
 * permutation of the int8 weights (rows padded with zeros to a multiple of four), so Flash does
 * not grow; only inference exports for DSP builds use it (training keeps the plain layout of
 * mt_linear_fwd_s8 for its RAM weights).
 *
 * DSP twin of nn/mt_linear_fwd_s8_rows4.c, bit-exact with it. Without scratch, with unaligned
 * weights or on a core without DSP, it runs the reference body (mt_linear_fwd_s8_rows4_ref.h).
 */
#include "mt_fixedpoint.h"
#include "mt_linear_fwd_s8_ref.h"
#include "mt_linear_fwd_s8_rows4_ref.h"
#include "mt_nn.h"
#include "mt_support.h"

int32_t mt_linear_fwd_s8_rows4_get_buffer_size(int32_t in_features)
{
#if MT_DSP
    return 2 * mt_rows4_padded(in_features);
#else  /* !MT_DSP */
    (void)in_features;
    return 0;
#endif /* MT_DSP */
}

#if MT_DSP

#if defined(MT_DSP_NATIVE)

/* One group of four k: the inputs' pairs (r8 = (x0, x2), r9 = (x1, x3)), the four rows' words
   (r4-r7), two SXTB16 and two SMLAD per row into r0-r3. Weights at r12, inputs at r11. */
#define MT_ROWS4_GROUP                                                                                        \
    "ldrd   r8, r9, [r11], #8\n\t"                                                                            \
    "ldm    r12!, {r4, r5, r6, r7}\n\t"                                                                       \
    "sxtb16 r10, r4\n\t"                                                                                      \
    "smlad  r0, r10, r8, r0\n\t"                                                                              \
    "sxtb16 r4, r4, ror #8\n\t"                                                                               \
    "smlad  r0, r4, r9, r0\n\t"                                                                               \
    "sxtb16 r10, r5\n\t"                                                                                      \
    "smlad  r1, r10, r8, r1\n\t"                                                                              \
    "sxtb16 r5, r5, ror #8\n\t"                                                                               \
    "smlad  r1, r5, r9, r1\n\t"                                                                               \
    "sxtb16 r10, r6\n\t"                                                                                      \
    "smlad  r2, r10, r8, r2\n\t"                                                                              \
    "sxtb16 r6, r6, ror #8\n\t"                                                                               \
    "smlad  r2, r6, r9, r2\n\t"                                                                               \
    "sxtb16 r10, r7\n\t"                                                                                      \
    "smlad  r3, r10, r8, r3\n\t"                                                                              \
    "sxtb16 r7, r7, ror #8\n\t"                                                                               \
    "smlad  r3, r7, r9, r3\n\t"

/*
 * dot4(w, col, n4, s): s[0..4) (the biases on entry) += the four interleaved rows at w (n4 >= 1
 * groups of four) . col; an odd group first, then two per loop pass.
 * NOTE: naked, in assembly: the loop needs all 14 registers, and LDM loads in register order,
 * which inline asm operands cannot fix.
 */
__attribute__((naked, noinline)) static void dot4(const int8_t *w __attribute__((unused)),
                                                  const int16_t *col __attribute__((unused)),
                                                  int32_t n4 __attribute__((unused)),
                                                  int32_t *s __attribute__((unused)))
{
    __asm__ volatile("push   {r3-r11, lr}\n\t"
                     "mov    r12, r0\n\t"
                     "mov    r11, r1\n\t"
                     "mov    lr, r2\n\t"
                     "ldm    r3, {r0, r1, r2, r3}\n\t"
                     "lsrs   lr, lr, #1\n\t"
                     "bcc    2f\n\t" MT_ROWS4_GROUP "2:\n\t"
                     "beq    4f\n\t"
                     "3:\n\t" MT_ROWS4_GROUP MT_ROWS4_GROUP "subs   lr, lr, #1\n\t"
                     "bne    3b\n\t"
                     "4:\n\t"
                     "ldr    r12, [sp]\n\t"
                     "stm    r12, {r0, r1, r2, r3}\n\t"
                     "pop    {r3-r11, pc}\n\t");
}

#else /* !MT_DSP_NATIVE: the same loop in C (emulated instructions) */

static void dot4(const int8_t *w, const int16_t *col, int32_t n4, int32_t *s)
{
    int32_t g, r;
    for (g = 0; g < n4; g++) {
        const int32_t x0 = mt_read_s16x2(col + 4 * g);
        const int32_t x1 = mt_read_s16x2(col + 4 * g + 2);
        for (r = 0; r < 4; r++) {
            const int32_t v = mt_read_s8x4(w + 16 * g + 4 * r);
            s[r] = mt_smlad(mt_sxtb16_ror8(v), x1, mt_smlad(mt_sxtb16(v), x0, s[r]));
        }
    }
}

#endif /* MT_DSP_NATIVE */

static void linear_dsp(const mt_linear_params *p,
                       const mt_per_channel_quant *q,
                       const int8_t *x,
                       int32_t in_features,
                       const int8_t *weight,
                       const int32_t *bias,
                       int32_t out_features,
                       int8_t *y,
                       int16_t *col)
{
    const int32_t zx = p->input_zero_point;
    const int32_t i4 = mt_rows4_padded(in_features);
    /* -z_x in both halves; SXTAB16 centres two bytes at once, already in SMLAD order */
    const int32_t off2 = (int32_t)(((uint32_t)(-zx) & 0xFFFFu) | ((uint32_t)(-zx) << 16));
    int32_t i, o, r;
    for (i = 0; i + 4 <= in_features; i += 4) {
        const int32_t v = mt_read_s8x4(x + i);
        mt_write_s16x2(col + i, mt_sxtab16(off2, v));
        mt_write_s16x2(col + i + 2, mt_sxtab16_ror8(off2, v));
    }
    if (i < in_features) {
        /* the last group: its values in SMLAD order, zeros past the end (zero weights there) */
        int16_t t[4] = {0, 0, 0, 0};
        for (r = 0; i + r < in_features; r++) {
            t[r] = (int16_t)((int32_t)x[i + r] - zx);
        }
        col[i] = t[0];
        col[i + 1] = t[2];
        col[i + 2] = t[1];
        col[i + 3] = t[3];
    }
    for (o = 0; o + 4 <= out_features; o += 4) {
        int32_t s[4];
        s[0] = bias[o];
        s[1] = bias[o + 1];
        s[2] = bias[o + 2];
        s[3] = bias[o + 3];
        dot4(weight + o * i4, col, i4 >> 2, s);
        for (r = 0; r < 4; r++) {
            mt_requant_block(&s[r], 1, q->multiplier[o + r], q->shift[o + r], p->output_zero_point, p->act_min,
                             p->act_max, y + o + r, 0);
        }
    }
    for (; o < out_features; o++) { /* the last rows, stored alone */
        const int8_t *w = weight + o * i4;
        int32_t acc = bias[o];
        for (i = 0; i < i4; i += 4) {
            const int32_t v = mt_read_s8x4(w + i);
            acc = mt_smlad(mt_sxtb16(v), mt_read_s16x2(col + i), acc);
            acc = mt_smlad(mt_sxtb16_ror8(v), mt_read_s16x2(col + i + 2), acc);
        }
        mt_requant_block(&acc, 1, q->multiplier[o], q->shift[o], p->output_zero_point, p->act_min, p->act_max,
                         y + o, 0);
    }
}

#endif /* MT_DSP */

mt_status mt_linear_fwd_s8_rows4(const mt_context *ctx,
                                 const mt_linear_params *params,
                                 const mt_per_channel_quant *quant,
                                 int32_t batch,
                                 const int8_t *input,
                                 int32_t in_features,
                                 const int8_t *weight,
                                 const int32_t *bias,
                                 int32_t out_features,
                                 int8_t *output)
{
    if (mt_linear_fwd_s8_check(params, quant, batch, input, in_features, weight, bias, out_features, output) !=
        MT_OK) {
        return MT_ERR_ARG;
    }
#if MT_DSP
    /* NOTE: LDM needs word-aligned weights (the exporter emits them in a union with an int32_t) */
    if (ctx && ctx->buf && ctx->size >= mt_linear_fwd_s8_rows4_get_buffer_size(in_features) &&
        ((uintptr_t)weight & 3u) == 0) {
        int32_t n;
        for (n = 0; n < batch; n++) {
            linear_dsp(params, quant, input + n * in_features, in_features, weight, bias, out_features,
                       output + n * out_features, (int16_t *)ctx->buf);
        }
        return MT_OK;
    }
#else  /* !MT_DSP */
    (void)ctx;
#endif /* MT_DSP */
    mt_linear_fwd_s8_rows4_ref(params, quant, batch, input, in_features, weight, bias, out_features, output);
    return MT_OK;
}
