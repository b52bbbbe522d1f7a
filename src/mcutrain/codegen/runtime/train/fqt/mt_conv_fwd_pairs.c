/*
 * mcutrain runtime: the DSP path of the FQT conv forward for dense convs with C a multiple of four
 * (mt_conv_fwd_pairs.h). Exact integer sums, so it gives the general path's results.
 *
 * Two output positions per pass, as the general path, but the two int16 im2col columns are
 * interleaved per group of four k ((x0, x2), (x1, x3) of column 0, then of column 1), so one LDM
 * brings all four words; two weight rows against them take two LDR, four SXTB16 and eight SMLAD:
 * 15 instructions per 16 MACs, the loop unrolled twice. The epilogue is in the same assembly
 * routine: every channel's requantization constants and running extremes sit in a record
 * (m, c1, sh, min, max - min, bias), the floor requantization is MT_ASM_REQUANT_FLOOR of the
 * library's mode (SMMLA + ASR + SSAT; "tflite": SMMLAR + QADD + ASR + SSAT, the result register
 * its own scratch) + STRB and
 * the extremes take one unsigned compare of acc - min against the width (the update is out of
 * line). About 1.1 instructions per MAC with small-cnn's conv2 (K = 144), against 1.8 before.
 */
#include "mt_arch.h"
#include "mt_conv_fwd_pairs.h"
#include "mt_fixedpoint.h"

#if MT_DSP

#define FP_OMAX 64 /* output channels: records on the stack, 64 x 24 bytes */
#define FP_REC 6   /* words per record: m, c1, sh, min, max - min, bias */

/* What the assembly routine reads and advances (32-bit fields on the core: offsets 0, 4, ... 24). */
typedef struct {
    const int32_t *cols; /* the interleaved column pair */
    int32_t *rec;        /* record of the next channel pair */
    int32_t pairs;       /* channel pairs left */
    int8_t *out0;        /* next output of column 0 */
    int8_t *out1;        /* next output of column 1 */
    int32_t n4;          /* K / 4 */
    int32_t kk;          /* K */
} fp_blk;

#if defined(MT_DSP_NATIVE)
/*
 * All channel pairs of one column pair: blk = {cols, rec, pairs, out0, out1, n4, kk} (rec, pairs,
 * out0 and out1 advance). Registers in the dot loop: sums r4-r7 (rows a, b x columns 0, 1), w r0,
 * cols r1, count r2, kk r3, column words r8-r11, weight halves r12 and lr; the block lives on the
 * stack meanwhile.
 */
void mt_fwd_pairs_run(const int8_t *w, fp_blk *blk);
__asm__(".syntax unified\n\t"
        ".thumb\n\t"
        ".text\n\t"
        ".align 2\n\t"
        ".global mt_fwd_pairs_run\n\t"
        ".thumb_func\n\t"
        ".type mt_fwd_pairs_run, %function\n"
        "mt_fwd_pairs_run:\n\t"
        "push   {r4-r11, lr}\n\t"
        "push   {r1}\n"
        "1:\n\t"
        "ldr    lr, [sp]\n\t"
        "ldr    r2, [lr, #4]\n\t"
        "ldr    r4, [r2, #20]\n\t"
        "ldr    r6, [r2, #44]\n\t"
        "mov    r5, r4\n\t"
        "mov    r7, r6\n\t"
        "ldr    r1, [lr, #0]\n\t"
        "ldr    r3, [lr, #24]\n\t"
        "ldr    r2, [lr, #20]\n\t"
        "tst    r2, #1\n\t"
        "beq    2f\n\t"
        "ldm    r1!, {r8-r11}\n\t"
        "ldr    r12, [r0, r3]\n\t"
        "sxtb16 lr, r12, ror #8\n\t"
        "sxtb16 r12, r12\n\t"
        "smlad  r6, r12, r8, r6\n\t"
        "smlad  r6, lr, r9, r6\n\t"
        "smlad  r7, r12, r10, r7\n\t"
        "smlad  r7, lr, r11, r7\n\t"
        "ldr    r12, [r0], #4\n\t"
        "sxtb16 lr, r12, ror #8\n\t"
        "sxtb16 r12, r12\n\t"
        "smlad  r4, r12, r8, r4\n\t"
        "smlad  r4, lr, r9, r4\n\t"
        "smlad  r5, r12, r10, r5\n\t"
        "smlad  r5, lr, r11, r5\n\t"
        "\n"
        "2:\n\t"
        "lsrs   r2, r2, #1\n\t"
        "beq    4f\n"
        "3:\n\t"
        "ldm    r1!, {r8-r11}\n\t"
        "ldr    r12, [r0, r3]\n\t"
        "sxtb16 lr, r12, ror #8\n\t"
        "sxtb16 r12, r12\n\t"
        "smlad  r6, r12, r8, r6\n\t"
        "smlad  r6, lr, r9, r6\n\t"
        "smlad  r7, r12, r10, r7\n\t"
        "smlad  r7, lr, r11, r7\n\t"
        "ldr    r12, [r0], #4\n\t"
        "sxtb16 lr, r12, ror #8\n\t"
        "sxtb16 r12, r12\n\t"
        "smlad  r4, r12, r8, r4\n\t"
        "smlad  r4, lr, r9, r4\n\t"
        "smlad  r5, r12, r10, r5\n\t"
        "smlad  r5, lr, r11, r5\n\t"
        "ldm    r1!, {r8-r11}\n\t"
        "ldr    r12, [r0, r3]\n\t"
        "sxtb16 lr, r12, ror #8\n\t"
        "sxtb16 r12, r12\n\t"
        "smlad  r6, r12, r8, r6\n\t"
        "smlad  r6, lr, r9, r6\n\t"
        "smlad  r7, r12, r10, r7\n\t"
        "smlad  r7, lr, r11, r7\n\t"
        "ldr    r12, [r0], #4\n\t"
        "sxtb16 lr, r12, ror #8\n\t"
        "sxtb16 r12, r12\n\t"
        "smlad  r4, r12, r8, r4\n\t"
        "smlad  r4, lr, r9, r4\n\t"
        "smlad  r5, r12, r10, r5\n\t"
        "smlad  r5, lr, r11, r5\n\t"
        "subs   r2, r2, #1\n\t"
        "bne    3b\n"
        "4:\n\t"
        "add    r0, r0, r3\n\t"
        "ldr    lr, [sp]\n\t"
        "ldr    r2, [lr, #4]\n\t"
        "ldr    r1, [lr, #12]\n\t"
        "ldr    r3, [lr, #16]\n\t"
        "ldm    r2, {r8-r12}\n\t"
        MT_ASM_REQUANT_FLOOR("lr", "lr", "r4", "r8", "r9", "r10")
        "strb   lr, [r1], #1\n\t"
        MT_ASM_REQUANT_FLOOR("lr", "lr", "r5", "r8", "r9", "r10")
        "strb   lr, [r3], #1\n\t"
        "sub    lr, r4, r11\n\t"
        "cmp    lr, r12\n\t"
        "bhi    10f\n"
        "11:\n\t"
        "sub    lr, r5, r11\n\t"
        "cmp    lr, r12\n\t"
        "bhi    12f\n"
        "13:\n\t"
        "add    r8, r2, #24\n\t"
        "ldm    r8, {r8-r12}\n\t"
        MT_ASM_REQUANT_FLOOR("lr", "lr", "r6", "r8", "r9", "r10")
        "strb   lr, [r1], #1\n\t"
        MT_ASM_REQUANT_FLOOR("lr", "lr", "r7", "r8", "r9", "r10")
        "strb   lr, [r3], #1\n\t"
        "sub    lr, r6, r11\n\t"
        "cmp    lr, r12\n\t"
        "bhi    14f\n"
        "15:\n\t"
        "sub    lr, r7, r11\n\t"
        "cmp    lr, r12\n\t"
        "bhi    16f\n"
        "17:\n\t"
        "ldr    lr, [sp]\n\t"
        "add    r2, r2, #48\n\t"
        "str    r2, [lr, #4]\n\t"
        "str    r1, [lr, #12]\n\t"
        "str    r3, [lr, #16]\n\t"
        "ldr    r2, [lr, #8]\n\t"
        "subs   r2, r2, #1\n\t"
        "str    r2, [lr, #8]\n\t"
        "bne    1b\n\t"
        "add    sp, sp, #4\n\t"
        "pop    {r4-r11, pc}\n"
        "10:\n\t"
        "add    r12, r12, r11\n\t"
        "cmp    r4, r11\n\t"
        "it     lt\n\t"
        "movlt  r11, r4\n\t"
        "cmp    r4, r12\n\t"
        "it     gt\n\t"
        "movgt  r12, r4\n\t"
        "sub    r12, r12, r11\n\t"
        "strd   r11, r12, [r2, #12]\n\t"
        "b      11b\n"
        "12:\n\t"
        "add    r12, r12, r11\n\t"
        "cmp    r5, r11\n\t"
        "it     lt\n\t"
        "movlt  r11, r5\n\t"
        "cmp    r5, r12\n\t"
        "it     gt\n\t"
        "movgt  r12, r5\n\t"
        "sub    r12, r12, r11\n\t"
        "strd   r11, r12, [r2, #12]\n\t"
        "b      13b\n"
        "14:\n\t"
        "add    r12, r12, r11\n\t"
        "cmp    r6, r11\n\t"
        "it     lt\n\t"
        "movlt  r11, r6\n\t"
        "cmp    r6, r12\n\t"
        "it     gt\n\t"
        "movgt  r12, r6\n\t"
        "sub    r12, r12, r11\n\t"
        "strd   r11, r12, [r2, #36]\n\t"
        "b      15b\n"
        "16:\n\t"
        "add    r12, r12, r11\n\t"
        "cmp    r7, r11\n\t"
        "it     lt\n\t"
        "movlt  r11, r7\n\t"
        "cmp    r7, r12\n\t"
        "it     gt\n\t"
        "movgt  r12, r7\n\t"
        "sub    r12, r12, r11\n\t"
        "strd   r11, r12, [r2, #36]\n\t"
        "b      17b\n"
        ".size mt_fwd_pairs_run, . - mt_fwd_pairs_run");
#else  /* !defined(MT_DSP_NATIVE) */
static void mt_fwd_pairs_run(const int8_t *w, fp_blk *blk)
{
    const int32_t *cols0 = blk->cols;
    int32_t *rec = blk->rec;
    int8_t *out0 = blk->out0;
    int8_t *out1 = blk->out1;
    const int32_t n4 = blk->n4, kk = blk->kk;
    int32_t pairs = blk->pairs;
    for (; pairs > 0; --pairs, rec += 2 * FP_REC, w += 2 * kk) {
        int32_t s[4], r, g;
        s[0] = s[1] = rec[5];
        s[2] = s[3] = rec[FP_REC + 5];
        for (g = 0; g < n4; ++g) {
            const int32_t *c = cols0 + 4 * g;
            const int32_t ta = mt_read_s8x4(w + 4 * g), tb = mt_read_s8x4(w + kk + 4 * g);
            const int32_t a02 = mt_sxtb16(ta), a13 = mt_sxtb16_ror8(ta);
            const int32_t b02 = mt_sxtb16(tb), b13 = mt_sxtb16_ror8(tb);
            s[0] = mt_smlad(a13, c[1], mt_smlad(a02, c[0], s[0]));
            s[1] = mt_smlad(a13, c[3], mt_smlad(a02, c[2], s[1]));
            s[2] = mt_smlad(b13, c[1], mt_smlad(b02, c[0], s[2]));
            s[3] = mt_smlad(b13, c[3], mt_smlad(b02, c[2], s[3]));
        }
        for (r = 0; r < 4; ++r) {
            int32_t *q = rec + (r >> 1) * FP_REC;
            const int32_t acc = s[r];
            const int8_t y = (int8_t)mt_requantize_floor(acc, q[0], q[2], q[1]);
            if (r & 1) {
                *out1++ = y;
            } else {
                *out0++ = y;
            }
            if ((uint32_t)acc - (uint32_t)q[3] > (uint32_t)q[4]) {
                int32_t mn = q[3], mx = (int32_t)((uint32_t)q[3] + (uint32_t)q[4]);
                mn = acc < mn ? acc : mn;
                mx = acc > mx ? acc : mx;
                q[3] = mn;
                q[4] = (int32_t)((uint32_t)mx - (uint32_t)mn);
            }
        }
    }
}
#endif /* MT_DSP_NATIVE */

/* Column s (0 or 1) of the interleaved pair for output position p: x - z_x, padding 0. */
static void fill_col(const mt_conv_params *params,
                     const mt_dims *in_d,
                     const int8_t *input,
                     const mt_dims *f_d,
                     int32_t ho,
                     int32_t wo,
                     int32_t p,
                     int32_t s,
                     int32_t *cols)
{
    const int32_t hi_ = in_d->h, wi = in_d->w, ci = in_d->c;
    const int32_t b = p / (ho * wo), y = p / wo % ho, x = p % wo;
    const int32_t nz = (int32_t)(((uint32_t)(-params->input_zero_point) & 0xFFFFu) * 0x10001u);
    const int32_t ix0 = x * params->stride_w - params->pad_left;
    int32_t *dst = cols + 2 * s;
    int32_t i, j, c;
    for (i = 0; i < f_d->h; ++i) {
        const int32_t iy = y * params->stride_h - params->pad_top + i;
        if (iy >= 0 && iy < hi_ && ix0 >= 0 && ix0 + f_d->w <= wi) { /* the kernel row's taps are one run */
            const int8_t *px = input + ((b * hi_ + iy) * wi + ix0) * ci;
            const int8_t *end = px + f_d->w * ci;
            for (; px < end; px += 4, dst += 4) {
                const int32_t v = mt_read_s8x4(px);
                dst[0] = mt_sxtab16(nz, v);
                dst[1] = mt_sxtab16_ror8(nz, v);
            }
            continue;
        }
        for (j = 0; j < f_d->w; ++j) {
            const int32_t ix = ix0 + j;
            if (iy < 0 || iy >= hi_ || ix < 0 || ix >= wi) {
                for (c = 0; c < ci; c += 4, dst += 4) {
                    dst[0] = 0;
                    dst[1] = 0;
                }
            } else {
                const int8_t *px = input + ((b * hi_ + iy) * wi + ix) * ci;
                for (c = 0; c < ci; c += 4, dst += 4) {
                    const int32_t v = mt_read_s8x4(px + c);
                    dst[0] = mt_sxtab16(nz, v);
                    dst[1] = mt_sxtab16_ror8(nz, v);
                }
            }
        }
    }
}

int mt_conv_fwd_pairs(const mt_context *ctx,
                      const mt_conv_params *params,
                      const mt_per_channel_quant *quant,
                      const mt_dims *input_dims,
                      const int8_t *input,
                      const mt_dims *filter_dims,
                      const int8_t *filter,
                      const int32_t *bias,
                      const mt_dims *output_dims,
                      int8_t *output,
                      int32_t *acc_min,
                      int32_t *acc_max)
{
    const int32_t o_n = filter_dims->n, ci = input_dims->c;
    const int32_t kk = filter_dims->h * filter_dims->w * ci;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t npos = input_dims->n * ho * wo;
    int32_t rec[FP_OMAX * FP_REC];
    fp_blk blk;
    int8_t spare[FP_OMAX];
    int32_t *cols;
    int32_t o, pos;
    if (!ctx || !ctx->buf || ctx->size < 4 * kk || params->groups != 1 || (ci & 3) != 0 || filter_dims->c != ci ||
        (o_n & 1) != 0 || o_n < 2 || o_n > FP_OMAX || kk < 4 || npos < 1 || params->output_zero_point != -128 ||
        params->act_min != -128 || params->act_max != 127) {
        return 0;
    }
    for (o = 0; o < o_n; ++o) {
        if (!mt_requant_fast_ok(quant->multiplier[o], quant->shift[o])) {
            return 0;
        }
    }
    cols = (int32_t *)ctx->buf;
    for (o = 0; o < o_n; ++o) {
        int32_t *r = rec + o * FP_REC;
        const int32_t sh = mt_requant_sh(quant->shift[o]);
        r[0] = mt_requant_mult(quant->multiplier[o]);
        r[1] = mt_requant_c1(sh, -128);
        r[2] = sh;
        r[3] = acc_min[o];
        r[4] = (int32_t)((uint32_t)acc_max[o] - (uint32_t)acc_min[o]);
        r[5] = bias[o];
    }
    for (pos = 0; pos < npos; pos += 2) {
        const int32_t q = pos + 1 < npos ? pos + 1 : pos;
        fill_col(params, input_dims, input, filter_dims, ho, wo, pos, 0, cols);
        fill_col(params, input_dims, input, filter_dims, ho, wo, q, 1, cols);
        if (pos == 0) {
            for (o = 0; o < o_n; ++o) { /* no extremes yet: they start at this position's accumulator */
                if (acc_min[o] > acc_max[o]) {
                    const int8_t *wr = filter + o * kk;
                    int32_t acc = bias[o], g;
                    for (g = 0; g < kk / 4; ++g) {
                        const int32_t t = mt_read_s8x4(wr + 4 * g);
                        acc = mt_smlad(mt_sxtb16_ror8(t), cols[4 * g + 1], mt_smlad(mt_sxtb16(t), cols[4 * g], acc));
                    }
                    rec[o * FP_REC + 3] = acc;
                    rec[o * FP_REC + 4] = 0;
                }
            }
        }
        blk.cols = cols;
        blk.rec = rec;
        blk.pairs = o_n / 2;
        blk.out0 = output + pos * o_n;
        blk.out1 = q != pos ? output + q * o_n : spare;
        blk.n4 = kk / 4;
        blk.kk = kk;
        mt_fwd_pairs_run(filter, &blk);
    }
    for (o = 0; o < o_n; ++o) {
        const int32_t *r = rec + o * FP_REC;
        acc_min[o] = r[3];
        acc_max[o] = (int32_t)((uint32_t)r[3] + (uint32_t)r[4]);
    }
    return 1;
}

#endif /* MT_DSP */
