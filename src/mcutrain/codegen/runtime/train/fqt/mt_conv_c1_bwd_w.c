/*
 * mcutrain runtime: the one-channel-input path of the FQT conv weight gradient (see mt_conv_c1.h for
 * why; the forward's is mt_conv_c1.c, a file of its own so that a Helium build can replace the forward
 * alone). DSP builds only; exact integer arithmetic, so it gives the general kernel's results.
 *
 * Weight gradient (3x3, stride 1). G[o, t] = sum_p e[p, o] * x[p, t] runs over pairs of
 * horizontally adjacent output pixels, so that for tap (i, j) the pair (x[p, t], x[p + 1, t]) is
 * two adjacent int16 values of a padded centred copy of the image (one LDR at a fixed offset,
 * the copy has a fixed row stride) and the errors are one pair word (e[p, o], e[p + 1, o]):
 * one SMLAD per tap and pixel pair, the nine sums in registers for a whole output row of one
 * channel. A pair of zero errors is skipped (max-pool routing leaves one error in four, so
 * about half the pairs; exact: zeros add nothing).
 */
#include <string.h>

#include "mt_arch.h"
#include "mt_conv_c1.h"

#if MT_DSP

/* The weight gradient's padded image: fixed row stride, so each tap is an immediate offset. */
#define C1_XS 32   /* int16 values per padded row */
#define C1_XROWS 32

#if defined(MT_DSP_NATIVE)
/*
 * g[0..8] += sum over the n pixel pairs q of (e pair word ep[q]) . (x pair at xr + 2q + tap offset),
 * taps (i, j) at offset i * C1_XS + j; pairs of zero errors skipped.
 */
void mt_c1_bwdw_row(const int32_t *ep, const int16_t *xr, int32_t n, int32_t *g);
__asm__(".syntax unified\n\t"
        ".thumb\n\t"
        ".text\n\t"
        ".align 2\n\t"
        ".global mt_c1_bwdw_row\n\t"
        ".thumb_func\n\t"
        ".type mt_c1_bwdw_row, %function\n"
        "mt_c1_bwdw_row:\n\t"
        "push  {r3-r11, lr}\n\t"
        "ldm   r3, {r4-r12}\n"
        "1:\n\t"
        "ldr   r3, [r0], #4\n\t"
        "cbz   r3, 2f\n\t"
        "ldr   lr, [r1, #0]\n\t"
        "smlad r4, lr, r3, r4\n\t"
        "ldr   lr, [r1, #2]\n\t"
        "smlad r5, lr, r3, r5\n\t"
        "ldr   lr, [r1, #4]\n\t"
        "smlad r6, lr, r3, r6\n\t"
        "ldr   lr, [r1, #64]\n\t"
        "smlad r7, lr, r3, r7\n\t"
        "ldr   lr, [r1, #66]\n\t"
        "smlad r8, lr, r3, r8\n\t"
        "ldr   lr, [r1, #68]\n\t"
        "smlad r9, lr, r3, r9\n\t"
        "ldr   lr, [r1, #128]\n\t"
        "smlad r10, lr, r3, r10\n\t"
        "ldr   lr, [r1, #130]\n\t"
        "smlad r11, lr, r3, r11\n\t"
        "ldr   lr, [r1, #132]\n\t"
        "smlad r12, lr, r3, r12\n"
        "2:\n\t"
        "adds  r1, r1, #4\n\t"
        "subs  r2, r2, #1\n\t"
        "bne   1b\n\t"
        "ldr   r3, [sp]\n\t"
        "stm   r3, {r4-r12}\n\t"
        "pop   {r3-r11, pc}\n\t"
        ".size mt_c1_bwdw_row, . - mt_c1_bwdw_row");
#else  /* !defined(MT_DSP_NATIVE) */
static void mt_c1_bwdw_row(const int32_t *ep, const int16_t *xr, int32_t n, int32_t *g)
{
    int32_t q, i, j;
    for (q = 0; q < n; ++q, xr += 2) {
        if (ep[q] == 0) {
            continue;
        }
        for (i = 0; i < 3; ++i) {
            for (j = 0; j < 3; ++j) {
                g[i * 3 + j] = mt_smlad(mt_read_s16x2(xr + i * C1_XS + j), ep[q], g[i * 3 + j]);
            }
        }
    }
}
#endif /* MT_DSP_NATIVE */

/* (a.hi, b.hi) as one word (PKHTB with ASR #16). */
MT_INLINE int32_t c1_pk_hi(int32_t a, int32_t b)
{
    return (int32_t)(((uint32_t)a >> 16) | ((uint32_t)b & 0xFFFF0000u));
}

int mt_conv_c1_bwd_w(const mt_conv_params *params,
                     const mt_dims *input_dims,
                     const int8_t *input,
                     const mt_dims *output_dims,
                     const int8_t *e,
                     const mt_dims *filter_dims,
                     int32_t *grad,
                     int32_t *grad_bias)
{
    const int32_t hi_ = input_dims->h, wi = input_dims->w;
    const int32_t o_n = filter_dims->n;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t np = (wo + 1) / 2; /* pixel pairs of an output row (the last may be half) */
    const int32_t zx = params->input_zero_point;
    /* +2: the last pair of an odd row reads one value past its row (times a zero error) */
    int16_t img[C1_XROWS * C1_XS + 2];
    int32_t ep[4 * (C1_XS / 2)];
    int32_t b, y, x, o, c, q;
    if (params->groups != 1 || input_dims->c != 1 || filter_dims->c != 1 || filter_dims->h != 3 ||
        filter_dims->w != 3 || params->stride_h != 1 || params->stride_w != 1 || (o_n & 3) != 0 ||
        wo + 3 > C1_XS || ho + 2 > C1_XROWS) {
        return 0;
    }
    for (b = 0; b < input_dims->n; ++b) {
        memset(img, 0, sizeof img);
        for (y = 0; y < ho + 2; ++y) { /* padded row y holds image row y - pad_top */
            const int32_t iy = y - params->pad_top;
            if (iy < 0 || iy >= hi_) {
                continue;
            }
            for (x = 0; x < wo + 2; ++x) {
                const int32_t ix = x - params->pad_left;
                if (ix >= 0 && ix < wi) {
                    img[y * C1_XS + x] = (int16_t)(input[(b * hi_ + iy) * wi + ix] - zx);
                }
            }
        }
        for (y = 0; y < ho; ++y) {
            const int8_t *er = e + (b * ho + y) * wo * o_n;
            for (o = 0; o < o_n; o += 4) {
                /* per pixel pair: the error words of 4 channels; the bias sums in 16-bit lanes (one
                   row: |sum| <= 127 * wo < 2^15) and the OR of the raw bytes on the way */
                int32_t s02 = 0, s13 = 0;
                uint32_t any = 0;
                for (q = 0; q < np; ++q) { /* pair words (e[2q, o + c], e[2q + 1, o + c]) of 4 channels */
                    const int32_t va = mt_read_s8x4(er + 2 * q * o_n + o);
                    const int32_t vb = 2 * q + 1 < wo ? mt_read_s8x4(er + (2 * q + 1) * o_n + o) : 0;
                    const int32_t lo = mt_pkhbt(va, vb), hi = c1_pk_hi(va, vb);
                    ep[q] = mt_sxtb16(lo);
                    ep[C1_XS / 2 + q] = mt_sxtb16_ror8(lo);
                    ep[C1_XS + q] = mt_sxtb16(hi);
                    ep[3 * (C1_XS / 2) + q] = mt_sxtb16_ror8(hi);
                    s02 = mt_sxtab16(mt_sxtab16(s02, va), vb);
                    s13 = mt_sxtab16_ror8(mt_sxtab16_ror8(s13, va), vb);
                    any |= (uint32_t)va | (uint32_t)vb;
                }
                grad_bias[o] += (int16_t)(s02 & 0xFFFF);
                grad_bias[o + 1] += (int16_t)(s13 & 0xFFFF);
                grad_bias[o + 2] += (int16_t)((uint32_t)s02 >> 16);
                grad_bias[o + 3] += (int16_t)((uint32_t)s13 >> 16);
                for (c = 0; c < 4; ++c) {
                    if ((any >> (8 * c)) & 0xFFu) { /* a channel's row of zero errors adds nothing */
                        mt_c1_bwdw_row(ep + c * (C1_XS / 2), img + y * C1_XS, np, grad + (o + c) * 9);
                    }
                }
            }
        }
    }
    return 1;
}

#endif /* MT_DSP */
