/*
 * Linear weight and bias gradients from the kept int8 input and int8 errors, accumulated in int32
 * (Python twin: fqt_kernels.linear_bwd_w_acc and bias_grad_acc in mode "int").
 * Rows with a zero error are skipped (exact: they add nothing).
 * DSP twin of train/fqt/mt_linear_bwd_w_s8_s8.c, bit-exact with it; the reference loop
 * (mt_linear_bwd_w_s8_s8_ref.h) does the rows the DSP path declines, and all on a core without DSP.
 * DSP path: the centred input is widened once per chunk into int16 words in SMLAxy order
 * ((x0, x2), (x1, x3) per four inputs) on the stack, and the rows with a nonzero error run in
 * pairs whose two errors share one word: per four inputs one LDRD of the input words, then for
 * each row LDM of four gradients, four SMLAxy (the instruction picks the row's error half and the
 * input's half) and STM: 15 instructions per 8 MACs with the loop, against about 6 per MAC
 * before. An odd last row is paired with a row whose error is zero (its gradients get + 0).
 * mt_linear_bwd_w_s8_s8_keep (partial updates, one sample) zeroes the kept rows, then runs the same
 * loops over them only; the pruned rows (zero errors) are not touched.
 */
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_linear_bwd_w_s8_s8_ref.h"
#include "mt_train_dsp.h"

#if MT_DSP
#define LBW_CHUNK 512 /* inputs widened at once: 1 KB of stack */
#define LBW_OMAX 256  /* outputs of the nonzero-row list */

#if defined(MT_DSP_NATIVE)
/* ga[4k..4k+3] += e.lo * x, gb[...] += e.hi * x over n4 groups of the widened input xs. */
void mt_lbw_rows2(int32_t *ga, int32_t *gb, const int32_t *xs, int32_t n4, int32_t e);
__asm__(".syntax unified\n\t"
        ".thumb\n\t"
        ".text\n\t"
        ".align 2\n\t"
        ".global mt_lbw_rows2\n\t"
        ".thumb_func\n\t"
        ".type mt_lbw_rows2, %function\n"
        "mt_lbw_rows2:\n\t"
        "push   {r4-r8, lr}\n\t"
        "ldr    lr, [sp, #24]\n"
        "1:\n\t"
        "ldrd   r4, r5, [r2], #8\n\t"
        "ldm    r0, {r6, r7, r8, r12}\n\t"
        "smlabb r6, r4, lr, r6\n\t"
        "smlabb r7, r5, lr, r7\n\t"
        "smlatb r8, r4, lr, r8\n\t"
        "smlatb r12, r5, lr, r12\n\t"
        "stmia  r0!, {r6, r7, r8, r12}\n\t"
        "ldm    r1, {r6, r7, r8, r12}\n\t"
        "smlabt r6, r4, lr, r6\n\t"
        "smlabt r7, r5, lr, r7\n\t"
        "smlatt r8, r4, lr, r8\n\t"
        "smlatt r12, r5, lr, r12\n\t"
        "stmia  r1!, {r6, r7, r8, r12}\n\t"
        "subs   r3, r3, #1\n\t"
        "bne    1b\n\t"
        "pop    {r4-r8, pc}\n\t"
        ".size mt_lbw_rows2, . - mt_lbw_rows2");
#else  /* !defined(MT_DSP_NATIVE) */
static void mt_lbw_rows2(int32_t *ga, int32_t *gb, const int32_t *xs, int32_t n4, int32_t e)
{
    for (; n4 > 0; --n4, xs += 2, ga += 4, gb += 4) {
        ga[0] = mt_smlabb(xs[0], e, ga[0]);
        ga[1] = mt_smlabb(xs[1], e, ga[1]);
        ga[2] = mt_smlatb(xs[0], e, ga[2]);
        ga[3] = mt_smlatb(xs[1], e, ga[3]);
        gb[0] = mt_smlabt(xs[0], e, gb[0]);
        gb[1] = mt_smlabt(xs[1], e, gb[1]);
        gb[2] = mt_smlatt(xs[0], e, gb[2]);
        gb[3] = mt_smlatt(xs[1], e, gb[3]);
    }
}
#endif /* MT_DSP_NATIVE */

/*
 * The DSP path of one sample over rows keep[0..n) (keep NULL: 0..n), errors e[row]; returns 0 (nothing
 * done) when n exceeds the row list.
 */
MT_INLINE int bwd_w_rows(int32_t zx, const int8_t *x, int32_t in_features, const int8_t *e, const int32_t *keep,
                         int32_t n_rows, int32_t *grad, int32_t *grad_bias)
{
    const int32_t nz = (int32_t)(((uint32_t)(-zx) & 0xFFFFu) * 0x10001u); /* (-z, -z) */
    int16_t rows[LBW_OMAX + 1];
    int32_t xs[LBW_CHUNK / 2];
    int32_t n = 0, zero = -1, o, i0, k;
    if (n_rows > LBW_OMAX) {
        return 0;
    }
    for (k = 0; k < n_rows; ++k) {
        o = keep ? keep[k] : k;
        if (e[o] != 0) {
            rows[n++] = (int16_t)o;
            grad_bias[o] += e[o];
        } else if (zero < 0) {
            zero = o;
        }
    }
    if (n == 0) {
        return 1;
    }
    if (n & 1) {
        if (zero < 0) { /* every row nonzero and odd: the last one runs alone below */
            rows[n] = -1;
        } else {
            rows[n] = (int16_t)zero;
        }
        ++n;
    }
    for (i0 = 0; i0 < in_features; i0 += LBW_CHUNK) {
        const int32_t len = in_features - i0 < LBW_CHUNK ? in_features - i0 : LBW_CHUNK;
        const int32_t n4 = len >> 2;
        const int8_t *xc = x + i0;
        for (k = 0; k < n4; ++k) {
            const int32_t v = mt_read_s8x4(xc + 4 * k);
            xs[2 * k] = mt_sxtab16(nz, v);
            xs[2 * k + 1] = mt_sxtab16_ror8(nz, v);
        }
        for (k = 0; k < n; k += 2) {
            const int32_t oa = rows[k], ob = rows[k + 1];
            int32_t i;
            if (ob < 0) { /* a lone row */
                for (i = 0; i < len; ++i) {
                    grad[oa * in_features + i0 + i] += e[oa] * ((int32_t)xc[i] - zx);
                }
                continue;
            }
            if (n4 > 0) {
                mt_lbw_rows2(grad + oa * in_features + i0, grad + ob * in_features + i0, xs, n4,
                             (int32_t)(((uint32_t)e[oa] & 0xFFFFu) | ((uint32_t)e[ob] << 16)));
            }
            for (i = 4 * n4; i < len; ++i) {
                const int32_t xv = (int32_t)xc[i] - zx;
                grad[oa * in_features + i0 + i] += e[oa] * xv;
                grad[ob * in_features + i0 + i] += e[ob] * xv;
            }
        }
    }
    return 1;
}

/* The DSP path both kernels try first. */
static const mt_lbw_fast_fn fast_rows = bwd_w_rows;
#else  /* !MT_DSP */
static const mt_lbw_fast_fn fast_rows = NULL;
#endif /* MT_DSP */

mt_status mt_linear_bwd_w_s8_s8(int32_t input_zero_point,
                                int32_t batch,
                                const int8_t *input,
                                int32_t in_features,
                                const int8_t *e,
                                int32_t out_features,
                                int32_t *grad,
                                int32_t *grad_bias)
{
    return mt_linear_bwd_w_s8_s8_with(input_zero_point, batch, input, in_features, e, out_features, grad, grad_bias,
                                      fast_rows);
}

mt_status mt_linear_bwd_w_s8_s8_keep(int32_t input_zero_point,
                                     const int32_t *keep,
                                     int32_t n_keep,
                                     const int8_t *input,
                                     int32_t in_features,
                                     const int8_t *e,
                                     int32_t *grad,
                                     int32_t *grad_bias)
{
    return mt_linear_bwd_w_s8_s8_keep_with(input_zero_point, keep, n_keep, input, in_features, e, grad, grad_bias,
                                           fast_rows);
}
