/*
 * mcutrain runtime: the row body of the depthwise conv forward on DSP cores (internal, not part of
 * the API), shared by dsp/mt_depthwise_conv2d_fwd_s8.c (inference) and
 * dsp/mt_depthwise_conv2d_fwd_s8_range.c (FQT, which also records each channel's accumulator
 * extremes). Layers it does not take (mt_dwr_fits) run the quad loop of mt_depthwise_dsp.h.
 *
 * Why rows: a depthwise output sums kh * kw products of one channel, so with the channels of NHWC
 * side by side in a word the best a tap can do is one 16-bit MAC per product plus its share of
 * the input load, the two sign extensions and the weight load (about 2 instructions per MAC).
 * Along a row of one channel, two neighbouring inputs form one int16 pair, and one SMLAD does two
 * taps of an output. So four channels' input rows are first widened once, centred (x - z_x) and
 * laid out channel by channel as int16 rows (kw rows, slot i the window's row i, moved down by the
 * stride per output row; each input row is widened once per quad, 1.75 instructions per element),
 * with pad_left zeros in front and zeros behind and rows of zeros for padding rows, so that no
 * window needs a bound. Then per channel, per output row and per four outputs, each kernel row is
 * K = kw / 2 + 1 weight-pair loads and 4K SMLADs beside the pair loads (K + 1 at stride 1):
 *   stride 1 (outputs ox ... ox + 3, ox even; X_m the pair at column ox + 2m):
 *     y[ox] += X_m . (w[2m], w[2m + 1])          y[ox + 1] += X_m . (w[2m - 1], w[2m])
 *     y[ox + 2] += X_{m+1} . (w[2m], w[2m + 1])  y[ox + 3] += X_{m+1} . (w[2m - 1], w[2m])
 *   stride 2 (X_m the pair at column 2 ox + 2m):  y[ox + q] += X_{q+m} . (w[2m], w[2m + 1])
 * with w[-1] = w[kw] = 0 (the weight pairs are prepared per channel once per call). Padding rows
 * and columns multiply zeros (they add nothing in the reference either). The accumulators of the
 * output row are then requantized in the layer's prepared form, clamped to act_max and stored.
 * NOTE: |acc| <= |b| + 255 * sum|w| < 2^31 (checked at export) for partial sums in any order,
 * so the sums equal the reference's; SMLAD wraps like int32 and never needs to.
 */
#ifndef MT_DEPTHWISE_ROWS_DSP_H
#define MT_DEPTHWISE_ROWS_DSP_H

#include <stdint.h>
#include <string.h>

#include "mt_arch.h"
#include "mt_depthwise_dsp.h"
#include "mt_fixedpoint.h"
#include "mt_types.h"

#if MT_DSP

#define MT_DWR_WORDS 640 /* the int16 rows of four channels: 2560 bytes on the stack */
#define MT_DWR_KMAX 4    /* weight pairs per kernel row: kernels up to 7 wide */
#define MT_DWR_LINE 64   /* the accumulators of one output row of one channel (256 bytes) */

/* Loops over kernel rows and weight pairs (constant trip counts) unrolled whole: GCC -O2 would not. */
#if defined(__GNUC__) && !defined(__clang__)
#define MT_DWR_UNROLL _Pragma("GCC unroll 8")
#else /* not GCC */
#define MT_DWR_UNROLL
#endif /* __GNUC__ && !__clang__ */

/* The int16 elements of one widened row: every column a group of four outputs reads, even. */
MT_INLINE int32_t mt_dwr_row_len(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *f_d,
                                 const mt_dims *out_d)
{
    const int32_t k = f_d->w / 2 + 1, wo4 = (out_d->w + 3) & ~3;
    const int32_t need = p->stride_w == 1 ? wo4 + 2 * k : 2 * (wo4 + k);
    const int32_t have = p->pad_left + in_d->w;
    return ((need > have ? need : have) + 1) & ~1;
}

/* 1 when the row body takes a layer of requantization form `mode` (mt_dw_mode): a prepared form and
   act_min = -128 (the SSAT's bound; act_max is one compare), stride 1 or 2 in both directions, a
   square kernel of 3, 5 or 7, output rows of min_w pixels or more (5 for mt_dwr_quad: on narrower
   rows its per-row set-up costs more than the quad loop, for every kernel size, a 7x7 kernel on
   2-pixel rows took 2.7x the quad loop's instructions; MT_DWF_MIN_W = 4 for the fused mt_dwf_quad,
   whose 4-pixel rows beat the quad loop), and the widened rows of four channels within MT_DWR_WORDS
   (which also bounds mt_dwf_quad's slots: len / 2 <= MT_DWF_LW(kw) then). */
MT_INLINE int mt_dwr_fits(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *f_d, const mt_dims *out_d,
                          int mode, int32_t min_w)
{
    const int32_t s = p->stride_w;
    return mode != MT_DW_REQ_ANY && p->act_min == -128 && (s == 1 || s == 2) && p->stride_h == s &&
           (f_d->w == 3 || f_d->w == 5 || f_d->w == 7) &&
           f_d->h == f_d->w && out_d->w >= min_w && ((out_d->w + 3) & ~3) <= MT_DWR_LINE && 2 * f_d->h * mt_dwr_row_len(p, in_d, f_d, out_d) <= MT_DWR_WORDS;
}

/* Input row iy of channels [c0, c0 + 4) widened and centred into the four int16 rows at r (each
   `len` elements apart), at column pad_left on: two positions of four channels per step. */
MT_INLINE void mt_dwr_widen(const int8_t *x, int32_t w, int32_t c_n, int32_t zz, int16_t *r, int32_t len)
{
    int32_t ix;
    for (ix = 0; ix + 2 <= w; ix += 2, x += 2 * c_n, r += 2) {
        const int32_t v0 = mt_read_s8x4(x), v1 = mt_read_s8x4(x + c_n);
        const int32_t a0 = mt_sxtab16(zz, v0), a1 = mt_sxtab16(zz, v1);             /* channels 0, 2 */
        const int32_t b0 = mt_sxtab16_ror8(zz, v0), b1 = mt_sxtab16_ror8(zz, v1); /* channels 1, 3 */
        mt_write_s16x2(r, mt_pkhbt(a0, a1));
        mt_write_s16x2(r + len, mt_pkhbt(b0, b1));
        mt_write_s16x2(r + 2 * len, mt_pkhtb(a0, a1));
        mt_write_s16x2(r + 3 * len, mt_pkhtb(b0, b1));
    }
    if (ix < w) { /* an odd width's last column */
        const int32_t v0 = mt_read_s8x4(x);
        const int32_t a0 = mt_sxtab16(zz, v0), b0 = mt_sxtab16_ror8(zz, v0);
        r[0] = (int16_t)a0;
        r[len] = (int16_t)b0;
        r[2 * len] = (int16_t)(a0 >> 16);
        r[3 * len] = (int16_t)(b0 >> 16);
    }
}

/*
 * Step m of a kernel row for four outputs, the pair offsets literal (they are instruction immediates).
 * Stride 1: xm holds X_m, the step loads X_{m+1} into xn and the weights (A_m, B_m) at byte WO of w.
 * Stride 2: the step loads X_m ... X_{m+3} (from byte XO of x) and A_m (byte WO of w).
 */
#if defined(MT_DSP_NATIVE)
#define MT_DWR_S1_STEP(XO, WO)                                                                                   \
    do {                                                                                                         \
        int32_t wa_, wb_;                                                                                        \
        __asm__("ldr    %[xn], [%[x], #%c[xo]]\n\t"                                                             \
                "ldrd   %[wa], %[wb], [%[w], #%c[wo]]\n\t"                                                      \
                "smlad  %[a0], %[xm], %[wa], %[a0]\n\t"                                                         \
                "smlad  %[a1], %[xm], %[wb], %[a1]\n\t"                                                         \
                "smlad  %[a2], %[xn], %[wa], %[a2]\n\t"                                                         \
                "smlad  %[a3], %[xn], %[wb], %[a3]"                                                             \
                : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [xn] "=&r"(xn), [wa] "=&r"(wa_),  \
                  [wb] "=&r"(wb_)                                                                                \
                : [x] "r"(xr), [w] "r"(wr), [xm] "r"(xm), [xo] "n"(XO), [wo] "n"(WO)                             \
                : "memory");                                                                                     \
        xm = xn;                                                                                                 \
    } while (0)
#define MT_DWR_S2_STEP(XO, WO)                                                                                   \
    do {                                                                                                         \
        int32_t x0_, x1_, x2_, x3_, wa_;                                                                         \
        __asm__("ldrd   %[x0], %[x1], [%[x], #%c[xo]]\n\t"                                                      \
                "ldrd   %[x2], %[x3], [%[x], #%c[xo] + 8]\n\t"                                                  \
                "ldr    %[wa], [%[w], #%c[wo]]\n\t"                                                             \
                "smlad  %[a0], %[x0], %[wa], %[a0]\n\t"                                                         \
                "smlad  %[a1], %[x1], %[wa], %[a1]\n\t"                                                         \
                "smlad  %[a2], %[x2], %[wa], %[a2]\n\t"                                                         \
                "smlad  %[a3], %[x3], %[wa], %[a3]"                                                             \
                : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [x0] "=&r"(x0_), [x1] "=&r"(x1_), \
                  [x2] "=&r"(x2_), [x3] "=&r"(x3_), [wa] "=&r"(wa_)                                              \
                : [x] "r"(xr), [w] "r"(wr), [xo] "n"(XO), [wo] "n"(WO)                                           \
                : "memory");                                                                                     \
    } while (0)
#else /* !MT_DSP_NATIVE: the same sums through the portable instructions */
#define MT_DWR_S1_STEP(XO, WO)                                                                                   \
    do {                                                                                                         \
        const int32_t wa_ = wr[(WO) / 4], wb_ = wr[(WO) / 4 + 1];                                                \
        xn = xr[(XO) / 4];                                                                                       \
        a0 = mt_smlad(xm, wa_, a0);                                                                              \
        a1 = mt_smlad(xm, wb_, a1);                                                                              \
        a2 = mt_smlad(xn, wa_, a2);                                                                              \
        a3 = mt_smlad(xn, wb_, a3);                                                                              \
        xm = xn;                                                                                                 \
    } while (0)
#define MT_DWR_S2_STEP(XO, WO)                                                                                   \
    do {                                                                                                         \
        const int32_t wa_ = wr[(WO) / 4];                                                                        \
        a0 = mt_smlad(xr[(XO) / 4], wa_, a0);                                                                    \
        a1 = mt_smlad(xr[(XO) / 4 + 1], wa_, a1);                                                                \
        a2 = mt_smlad(xr[(XO) / 4 + 2], wa_, a2);                                                                \
        a3 = mt_smlad(xr[(XO) / 4 + 3], wa_, a3);                                                                \
    } while (0)
#endif /* MT_DSP_NATIVE */

/* The k steps of a kernel row: pair offsets XO0, XO0 + 4, ... and weight-pair offsets 0, 8, ... (bytes). */
#define MT_DWR_STEPS(STEP, XO0)                                                                                  \
    do {                                                                                                         \
        STEP((XO0), 0);                                                                                          \
        STEP((XO0) + 4, 8);                                                                                      \
        if (k >= 3) {                                                                                            \
            STEP((XO0) + 8, 16);                                                                                 \
        }                                                                                                        \
        if (k >= 4) {                                                                                            \
            STEP((XO0) + 12, 24);                                                                                \
        }                                                                                                        \
    } while (0)

/* The accumulators of the output row of one channel, four outputs per step, over all kw kernel rows:
   x the channel's widened row in ring slot 0 (slot j at x + j * rs), wr0 the channel's weight pairs of
   slot j at wr0 + 8 k j (the kernel row that slot holds for this output row, four channels a row). Stride 1: outputs ox ... ox + 3
   (ox even) read the pairs X_m at column ox + 2m; stride 2: output ox reads X_{ox + m}, m < k. */
MT_INLINE void mt_dwr_rows(const int32_t *x, int32_t rs, const int32_t *wr0, int32_t b, int32_t *acc,
                           int32_t groups, const int kw, const int k, const int s)
{
    for (; groups > 0; --groups, x += 2 * s, acc += 4) {
        const int32_t *xr = x, *wr = wr0;
        int32_t a0 = b, a1 = b, a2 = b, a3 = b;
        int r;
        MT_DWR_UNROLL
        for (r = 0; r < kw; ++r, xr += rs, wr += 8 * k) { /* wr: four channels' pairs per kernel row */
            if (s == 1) {
                int32_t xm = xr[0], xn;
                MT_DWR_STEPS(MT_DWR_S1_STEP, 4);
                (void)xm;
            } else {
                MT_DWR_STEPS(MT_DWR_S2_STEP, 0);
            }
        }
        acc[0] = a0;
        acc[1] = a1;
        acc[2] = a2;
        acc[3] = a3;
    }
}

#undef MT_DWR_STEPS
#undef MT_DWR_S1_STEP
#undef MT_DWR_S2_STEP

/* min(v, hi): CMP and one conditional MOV on a native core (GCC's select re-extends the byte). */
MT_INLINE int32_t mt_dwr_min(int32_t v, int32_t hi)
{
#if defined(MT_DSP_NATIVE)
    __asm__("cmp %0, %1\n\tit gt\n\tmovgt %0, %1" : "+r"(v) : "r"(hi) : "cc");
    return v;
#else  /* !MT_DSP_NATIVE */
    return v > hi ? hi : v;
#endif /* MT_DSP_NATIVE */
}

/* The wo outputs of an output row of one channel, c_n bytes apart: the extremes (range), the
   prepared requantization of form `mode` (SSAT to [-128, 127], the layer's act_min), the act_max. */
MT_INLINE void mt_dwr_out(const int32_t *acc, int32_t wo, int8_t *y, int32_t c_n, int32_t rm, int32_t rsh,
                          int32_t rc1, int32_t act_hi, int32_t *lo, int32_t *hi, const int mode, const int range)
{
    int32_t vmin = *lo, vmax = *hi;
    int32_t t;
#define MT_DWR_OUT_ONE(a, at)                                                                                    \
    do {                                                                                                         \
        const int32_t a_ = (a);                                                                                  \
        int32_t v_;                                                                                              \
        if (range) {                                                                                             \
            vmin = a_ < vmin ? a_ : vmin;                                                                        \
            vmax = a_ > vmax ? a_ : vmax;                                                                        \
        }                                                                                                        \
        v_ = mode == MT_DW_REQ_FLOOR ? mt_requantize_floor(a_, rm, rsh, rc1) : mt_requantize_fast(a_, rm, rsh, rc1); \
        (at) = (int8_t)mt_dwr_min(v_, act_hi);                                                                   \
    } while (0)
    for (; wo >= 4; wo -= 4, acc += 4, y += 4 * c_n) { /* four per step: one loop test, offsets from y */
        int8_t *y2 = y + 2 * c_n;
        MT_DWR_OUT_ONE(acc[0], y[0]);
        MT_DWR_OUT_ONE(acc[1], y[c_n]);
        MT_DWR_OUT_ONE(acc[2], y2[0]);
        MT_DWR_OUT_ONE(acc[3], y2[c_n]);
    }
    for (t = 0; t < wo; ++t) {
        MT_DWR_OUT_ONE(acc[t], y[t * c_n]);
    }
#undef MT_DWR_OUT_ONE
    *lo = vmin;
    *hi = vmax;
}

/* mt_dwr_out with its requantization form as a constant (one copy of the loop per form). */
MT_INLINE void mt_dwr_out_any(const int32_t *acc, int32_t wo, int8_t *y, int32_t c_n, int32_t rm, int32_t rsh,
                              int32_t rc1, int32_t act_hi, int32_t *lo, int32_t *hi, int mode, const int range)
{
    if (mode == MT_DW_REQ_FLOOR) {
        mt_dwr_out(acc, wo, y, c_n, rm, rsh, rc1, act_hi, lo, hi, MT_DW_REQ_FLOOR, range);
    } else {
        mt_dwr_out(acc, wo, y, c_n, rm, rsh, rc1, act_hi, lo, hi, MT_DW_REQ_FAST, range);
    }
}

/* mt_dwr_rows with its kernel width and stride as constants (one unrolled copy of the loop each). */
MT_INLINE void mt_dwr_rows_any(const int32_t *x, int32_t rs, const int32_t *wr, int32_t b, int32_t *acc,
                               int32_t groups, int32_t kw, int32_t s)
{
    if (kw == 3) {
        if (s == 1) {
            mt_dwr_rows(x, rs, wr, b, acc, groups, 3, 2, 1);
        } else {
            mt_dwr_rows(x, rs, wr, b, acc, groups, 3, 2, 2);
        }
    } else if (kw == 5) {
        if (s == 1) {
            mt_dwr_rows(x, rs, wr, b, acc, groups, 5, 3, 1);
        } else {
            mt_dwr_rows(x, rs, wr, b, acc, groups, 5, 3, 2);
        }
    } else if (s == 1) {
        mt_dwr_rows(x, rs, wr, b, acc, groups, 7, 4, 1);
    } else {
        mt_dwr_rows(x, rs, wr, b, acc, groups, 7, 4, 2);
    }
}

/* The weight pairs of one channel: per kernel row i (at wp + i * stride), (A_m, B_m) =
   ((w[2m], w[2m + 1]), (w[2m - 1], w[2m])) for m < k, with w[-1] = w[kw] = 0 (and beyond). */
MT_INLINE void mt_dwr_pairs(const int8_t *f, int32_t kh, int32_t kw, int32_t k, int32_t *wp, int32_t stride)
{
    int32_t i, m;
    for (i = 0; i < kh; ++i, f += kw, wp += stride) {
        for (m = 0; m < k; ++m) {
            const int32_t j = 2 * m;
            const int32_t w0 = j < kw ? f[j] : 0, w1 = j + 1 < kw ? f[j + 1] : 0, wm = j >= 1 ? f[j - 1] : 0;
            wp[2 * m] = (int32_t)(((uint32_t)w0 & 0xFFFFu) | ((uint32_t)w1 << 16));
            wp[2 * m + 1] = (int32_t)(((uint32_t)wm & 0xFFFFu) | ((uint32_t)w0 << 16));
        }
    }
}

/* Input row iy (a padding row of zeros outside [0, h)) of channels [c0, c0 + 4) into the slot at buf. */
MT_INLINE void mt_dwr_fill(int32_t *buf, int32_t iy, const int8_t *image, int32_t h, int32_t w, int32_t c_n,
                           int32_t zz, int32_t pad_left, int32_t len)
{
    if (iy >= 0 && iy < h) {
        mt_dwr_widen(image + iy * w * c_n, w, c_n, zz, (int16_t *)(void *)buf + pad_left, len);
    } else {
        memset(buf, 0, (size_t)(2 * len) * sizeof(int32_t));
    }
}

/* Channels [c0, c0 + 4) over every output position (mt_dwr_fits holds) in requantization form `mode`;
   `range` (a constant per call site) also merges the extremes into acc_min / acc_max. Slot i of the
   buffer holds input row iy0 + i of the output row's window; the next output row moves the slots
   down by the stride (the moved rows are the kernel's, s of kw new ones are widened). */
MT_INLINE void mt_dwr_quad(const mt_conv_params *p, const mt_per_channel_quant *q, const mt_dims *in_d,
                           const int8_t *input, const mt_dims *f_d, const int8_t *filter, const int32_t *bias,
                           const mt_dims *out_d, int8_t *output, int32_t *acc_min, int32_t *acc_max, int32_t c0,
                           int mode, const int range)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c, wo = out_d->w, kw = f_d->w, s = p->stride_w;
    const int32_t k = kw / 2 + 1, wrow = 8 * k;
    const int32_t len = mt_dwr_row_len(p, in_d, f_d, out_d), rs = 2 * len, groups = (wo + 3) / 4;
    const int32_t zz = (int32_t)(((uint32_t)(-p->input_zero_point) & 0xFFFFu) | ((uint32_t)(-p->input_zero_point) << 16));
    int32_t buf[MT_DWR_WORDS];
    int32_t wp[7 * 8 * MT_DWR_KMAX]; /* per kernel row, four channels' pairs */
    int32_t acc[MT_DWR_LINE];
    int32_t rm[4], rsh[4], rc1[4], lo[4], hi[4];
    int32_t n, oy, ch, i;
    for (ch = 0; ch < 4; ++ch) {
        const int32_t c = c0 + ch;
        mt_dwr_pairs(filter + c * kw * kw, kw, kw, k, wp + ch * 2 * k, wrow);
        rm[ch] = mt_requant_mult(q->multiplier[c]);
        rsh[ch] = mt_requant_sh(q->shift[c]);
        rc1[ch] = mt_requant_c1(rsh[ch], p->output_zero_point);
        lo[ch] = range ? acc_min[c] : 0;
        hi[ch] = range ? acc_max[c] : 0;
    }
    memset(buf, 0, (size_t)(kw * rs) * sizeof(int32_t)); /* the padding columns stay 0 */
    for (n = 0; n < in_d->n; ++n) {
        const int8_t *image = input + n * h * w * c_n + c0;
        for (oy = 0; oy < out_d->h; ++oy) {
            const int32_t iy0 = oy * s - p->pad_top;
            int8_t *y = output + ((n * out_d->h + oy) * wo) * c_n + c0;
            if (oy == 0) {
                for (i = 0; i < kw; ++i) {
                    mt_dwr_fill(buf + i * rs, iy0 + i, image, h, w, c_n, zz, p->pad_left, len);
                }
            } else {
                memmove(buf, buf + s * rs, (size_t)((kw - s) * rs) * sizeof(int32_t));
                for (i = kw - s; i < kw; ++i) {
                    mt_dwr_fill(buf + i * rs, iy0 + i, image, h, w, c_n, zz, p->pad_left, len);
                }
            }
            for (ch = 0; ch < 4; ++ch) {
                mt_dwr_rows_any(buf + ch * (len / 2), rs, wp + ch * 2 * k, bias[c0 + ch], acc, groups, kw, s);
                mt_dwr_out_any(acc, wo, y + ch, c_n, rm[ch], rsh[ch], rc1[ch], p->act_max, &lo[ch], &hi[ch], mode,
                               range);
            }
        }
    }
    if (range) {
        for (ch = 0; ch < 4; ++ch) {
            acc_min[c0 + ch] = lo[ch];
            acc_max[c0 + ch] = hi[ch];
        }
    }
}

/*
 * The inference row body (no extremes): the same sums as mt_dwr_quad, with the requantization fused
 * into the tap loop and four channels stored per word.
 *
 * Why: mt_dwr_quad stored each output's accumulator, reloaded it, requantized it, clamped it to
 * act_max (CMP / IT / MOV) and stored one byte c_n bytes apart, about 10 instructions per output
 * (1.1 per MAC of a 3x3 kernel), and GCC spilled the tap loop's pointers and weights around the
 * inline-assembly steps; the kw - s kept rows were moved down by memmove per output row (0.36 per MAC
 * on a 64x64 map). Here one inline-assembly loop per channel and output row takes a group of four
 * outputs through all kw kernel rows in 14 registers (weights loaded by LDRD, no spill), then
 * requantizes the four accumulators in registers (3 instructions each for an output zero point of
 * -128) and stores each result's byte into a staging line in which the four channels of a position
 * are one word; one pass per output row then clamps four channels to act_max at once (SSUB8 / SEL)
 * and stores them with one STR. The rows are a ring (input row iy in slot iy mod kw): instead of
 * moving rows, each output row starts the channel's weight table at another row (the table holds
 * the kernel rows twice over, 2 kw - 1 rows, each row followed by the channel's prepared
 * requantization constants, so that they sit at one fixed offset from any start). The rows of a
 * channel lie in one block (slot stride MT_DWF_LW(kw) words), so every input and weight offset of
 * the loop is an instruction immediate.
 */
#define MT_DWF_LW(kw) (MT_DWR_WORDS / 4 / (kw)) /* words of one channel's row slot: 53, 32, 22 */
#define MT_DWF_TABLE (4 * 13 * 11)               /* four channels' tables: 13 rows of 8 pairs + 3 */
#ifndef MT_DWF_MIN_W
#define MT_DWF_MIN_W 4 /* the narrowest output rows the inference row body takes */
#endif

/* min(a, b) of four int8 lanes (SSUB8 sets GE where a >= b, SEL then takes b there). */
MT_INLINE int32_t mt_dwf_min_s8x4(int32_t a, int32_t b)
{
#if defined(MT_DSP_NATIVE)
    int32_t r;
    __asm__("ssub8 %0, %1, %2\n\tsel %0, %2, %1" : "=&r"(r) : "r"(a), "r"(b) : "cc");
    return r;
#else  /* !MT_DSP_NATIVE */
    uint32_t r = 0;
    int t;
    for (t = 0; t < 4; ++t) {
        const int32_t x = (int32_t)(int8_t)(uint8_t)((uint32_t)a >> (8 * t));
        const int32_t y = (int32_t)(int8_t)(uint8_t)((uint32_t)b >> (8 * t));
        r |= ((uint32_t)(x < y ? x : y) & 0xFFu) << (8 * t);
    }
    return (int32_t)r;
#endif /* MT_DSP_NATIVE */
}

/* n words (a constant) from src to dst, the blocks apart: four words per LDM / STM pair, no call
   (newlib's memcpy took 92-158 instructions for the 36-66 words of a 5x5 or 7x7 table, these 20-35). */
MT_INLINE void mt_dwf_copy(int32_t *dst, const int32_t *src, const int n)
{
#if defined(MT_DSP_NATIVE)
    if (n >= 4) {
        __asm__ volatile(".rept %c[q]\n\t"
                         "ldmia   %[s]!, {r4, r5, r6, r12}\n\t"
                         "stmia   %[d]!, {r4, r5, r6, r12}\n\t"
                         ".endr"
                         : [s] "+r"(src), [d] "+r"(dst)
                         : [q] "i"(n / 4)
                         : "r4", "r5", "r6", "r12", "memory");
    }
    if (n & 2) {
        const int32_t a = src[0], b = src[1];
        dst[0] = a, dst[1] = b, src += 2, dst += 2;
    }
    if (n & 1) {
        dst[0] = src[0];
    }
#else  /* !MT_DSP_NATIVE */
    memcpy(dst, src, (size_t)n * sizeof(int32_t));
#endif /* MT_DSP_NATIVE */
}

/* The weight table of one channel (see above): rows j < 2 kw - 1 hold kernel row j mod kw, as the
   pairs (A_m, B_m) of mt_dwr_pairs at stride 1 or A_m alone at stride 2, then (m, c1, sh). */
MT_INLINE void mt_dwf_table(const int8_t *f, const int kw, const int k, const int s, int32_t rm, int32_t rc1,
                            int32_t rsh, int32_t *t)
{
    const int npair = s == 1 ? 2 * k : k, rw = npair + 3;
    int32_t *row = t;
    int j, m;
    for (j = 0; j < kw; ++j, row += rw, f += kw) {
        MT_DWR_UNROLL
        for (m = 0; m < k; ++m) { /* kw and k constant: the bounds below fold away */
            const int32_t w0 = 2 * m < kw ? f[2 * m] : 0, w1 = 2 * m + 1 < kw ? f[2 * m + 1] : 0;
            const int32_t a = (int32_t)(((uint32_t)w0 & 0xFFFFu) | ((uint32_t)w1 << 16));
            if (s == 1) {
                const int32_t wm = m >= 1 ? f[2 * m - 1] : 0;
                row[2 * m] = a;
                row[2 * m + 1] = (int32_t)(((uint32_t)wm & 0xFFFFu) | ((uint32_t)w0 << 16));
            } else {
                row[m] = a;
            }
        }
        row[npair] = rm;
        row[npair + 1] = rc1;
        row[npair + 2] = rsh;
    }
    mt_dwf_copy(row, t, (kw - 1) * rw); /* rows kw ... 2 kw - 2: rows 0 ... kw - 2 again */
}

#if defined(MT_DSP_NATIVE)
/*
 * The loops' assembler text. .rept loops over the kernel rows (mtdw_r) and pair steps (mtdw_m, mtdw_j)
 * unroll a group; the group's first input load post-increments px to the next group (so every other
 * offset is less the group's step, D bytes), and the first product into each output starts from the
 * bias (SMLAD's accumulate operand).
 */
/* The address of pair X_i of kernel row mtdw_r, D the group's step already added to px. */
#define MT_DWF_X(I, D) "[%[px], #(mtdw_r * %c[lwb] + 4 * (" I ") - " #D ")]"

/* Stride-1 step m of a kernel row: X_m in XC, loads X_{m+1} into XN (step 0 has it from the row's LDRD)
   and (A_m, B_m), four SMLADs. */
#define MT_DWF_S1_STEP(XC, XN)                                                                                   \
    ".if mtdw_m != 0\n\t"                                                                                      \
    "ldr   %[" XN "], " MT_DWF_X("mtdw_m + 1", 8) "\n\t"                                                          \
    ".endif\n\t"                                                                                                \
    "ldrd  %[wa], %[wb], [%[pw], #(mtdw_r * %c[rwb] + 8 * mtdw_m)]\n\t"                                        \
    ".if (mtdw_r == 0) && (mtdw_m == 0)\n\t"                                                                    \
    "smlad %[a0], %[" XC "], %[wa], %[b]\n\t"                                                                   \
    "smlad %[a1], %[" XC "], %[wb], %[b]\n\t"                                                                   \
    "smlad %[a2], %[" XN "], %[wa], %[b]\n\t"                                                                   \
    "smlad %[a3], %[" XN "], %[wb], %[b]\n\t"                                                                   \
    ".else\n\t"                                                                                                 \
    "smlad %[a0], %[" XC "], %[wa], %[a0]\n\t"                                                                  \
    "smlad %[a1], %[" XC "], %[wb], %[a1]\n\t"                                                                  \
    "smlad %[a2], %[" XN "], %[wa], %[a2]\n\t"                                                                  \
    "smlad %[a3], %[" XN "], %[wb], %[a3]\n\t"                                                                  \
    ".endif\n\t"

/* The taps of a stride-1 group: per kernel row one LDRD of X_0 and X_1, then per pair step one LDR (but
   the first), one LDRD, four SMLADs. */
#define MT_DWF_S1_TAPS                                                                                           \
    ".set mtdw_r, 0\n\t"                                                                                        \
    ".rept %c[kw]\n\t"                                                                                          \
    ".if mtdw_r == 0\n\t"                                                                                       \
    "ldrd  %[x0], %[x1], [%[px]], #8\n\t"                                                                       \
    ".else\n\t"                                                                                                 \
    "ldrd  %[x0], %[x1], " MT_DWF_X("0", 8) "\n\t"                                                               \
    ".endif\n\t"                                                                                                \
    ".set mtdw_m, 0\n\t"                                                                                        \
    ".rept %c[k]\n\t"                                                                                           \
    ".if (mtdw_m & 1) == 0\n\t" MT_DWF_S1_STEP("x0", "x1") ".else\n\t" MT_DWF_S1_STEP("x1", "x0") ".endif\n\t"   \
    ".set mtdw_m, mtdw_m + 1\n\t"                                                                               \
    ".endr\n\t"                                                                                                 \
    ".set mtdw_r, mtdw_r + 1\n\t"                                                                               \
    ".endr\n\t"

/* Output q's product of X_j (in XJ) in a stride-2 group: A_{j - q} (in w0 ... w3) when 0 <= j - q < k. */
#define MT_DWF_S2_MAC(Q, XJ, J)                                                                                  \
    ".set mtdw_q, " J " - " #Q "\n\t"                                                                           \
    ".if (mtdw_q >= 0) && (mtdw_q < %c[k])\n\t"                                                                 \
    ".if (mtdw_r == 0) && (mtdw_q == 0)\n\t"                                                                    \
    "smlad %[a" #Q "], %[" XJ "], %[w0], %[b]\n\t"                                                              \
    ".elseif mtdw_q == 0\n\t"                                                                                   \
    "smlad %[a" #Q "], %[" XJ "], %[w0], %[a" #Q "]\n\t"                                                        \
    ".elseif mtdw_q == 1\n\t"                                                                                   \
    "smlad %[a" #Q "], %[" XJ "], %[w1], %[a" #Q "]\n\t"                                                        \
    ".elseif mtdw_q == 2\n\t"                                                                                   \
    "smlad %[a" #Q "], %[" XJ "], %[w2], %[a" #Q "]\n\t"                                                        \
    ".else\n\t"                                                                                                 \
    "smlad %[a" #Q "], %[" XJ "], %[w3], %[a" #Q "]\n\t"                                                        \
    ".endif\n\t"                                                                                                \
    ".endif\n\t"
#define MT_DWF_S2_MACS(XJ, J)                                                                                    \
    MT_DWF_S2_MAC(0, XJ, J) MT_DWF_S2_MAC(1, XJ, J) MT_DWF_S2_MAC(2, XJ, J) MT_DWF_S2_MAC(3, XJ, J)

/* The taps of a stride-2 group: per kernel row the k weights (LDRD), then the k + 3 input pairs, two
   by LDRD into x0 and w2 for a 3x3 kernel (w2 is no weight there), else one by LDR into x0, each with
   its SMLAD into every output q with 0 <= j - q < k. */
#define MT_DWF_S2_TAPS                                                                                           \
    ".set mtdw_r, 0\n\t"                                                                                        \
    ".rept %c[kw]\n\t"                                                                                          \
    "ldrd  %[w0], %[w1], [%[pw], #(mtdw_r * %c[rwb])]\n\t"                                                      \
    ".if %c[k] == 3\n\t"                                                                                        \
    "ldr   %[w2], [%[pw], #(mtdw_r * %c[rwb] + 8)]\n\t"                                                         \
    ".elseif %c[k] == 4\n\t"                                                                                    \
    "ldrd  %[w2], %[w3], [%[pw], #(mtdw_r * %c[rwb] + 8)]\n\t"                                                  \
    ".endif\n\t"                                                                                                \
    ".if %c[k] == 2\n\t"                                                                                        \
    ".set mtdw_j, 0\n\t"                                                                                        \
    ".rept 2\n\t"                                                                                               \
    ".if (mtdw_r == 0) && (mtdw_j == 0)\n\t"                                                                    \
    "ldrd  %[x0], %[w2], [%[px]], #16\n\t"                                                                      \
    ".else\n\t"                                                                                                 \
    "ldrd  %[x0], %[w2], " MT_DWF_X("mtdw_j", 16) "\n\t"                                                         \
    ".endif\n\t"                                                                                                \
    MT_DWF_S2_MACS("x0", "mtdw_j") MT_DWF_S2_MACS("w2", "mtdw_j + 1")                                           \
    ".set mtdw_j, mtdw_j + 2\n\t"                                                                               \
    ".endr\n\t"                                                                                                 \
    "ldr   %[x0], " MT_DWF_X("4", 16) "\n\t"                                                                     \
    MT_DWF_S2_MACS("x0", "4")                                                                                   \
    ".else\n\t"                                                                                                 \
    ".set mtdw_j, 0\n\t"                                                                                        \
    ".rept %c[k] + 3\n\t"                                                                                       \
    ".if (mtdw_r == 0) && (mtdw_j == 0)\n\t"                                                                    \
    "ldr   %[x0], [%[px]], #16\n\t"                                                                             \
    ".else\n\t"                                                                                                 \
    "ldr   %[x0], " MT_DWF_X("mtdw_j", 16) "\n\t"                                                                \
    ".endif\n\t"                                                                                                \
    MT_DWF_S2_MACS("x0", "mtdw_j")                                                                              \
    ".set mtdw_j, mtdw_j + 1\n\t"                                                                               \
    ".endr\n\t"                                                                                                 \
    ".endif\n\t"                                                                                                \
    ".set mtdw_r, mtdw_r + 1\n\t"                                                                               \
    ".endr\n\t"

/* The four outputs' requantization (REQ: MT_ASM_REQUANT_FLOOR / _FAST) and byte stores, 4 bytes apart,
   into the staging line; Y the result (an accumulator itself where the form allows: A0 ... A3). */
#define MT_DWF_REQ1(REQ, Y, T, A, M, C1, SH)                                                                     \
    REQ("%[" Y "]", "%[" T "]", "%[" A "]", "%[" M "]", "%[" C1 "]", "%[" SH "]")                                \
    "strb  %[" Y "], [%[ps]], #4\n\t"
#define MT_DWF_STORE4(REQ, Y0, Y1, Y2, Y3, T, M, C1, SH)                                                         \
    MT_DWF_REQ1(REQ, Y0, T, "a0", M, C1, SH) MT_DWF_REQ1(REQ, Y1, T, "a1", M, C1, SH)                           \
    MT_DWF_REQ1(REQ, Y2, T, "a2", M, C1, SH) MT_DWF_REQ1(REQ, Y3, T, "a3", M, C1, SH)

#define MT_DWF_LOOP_END                                                                                          \
    "subs  %[n], %[n], #1\n\t"                                                                                  \
    "bne   1b"

/* Stride 1, zero point -128: the shift stays in a register (t) and each output's SMMLA / ASR / SSAT
   works in its accumulator (the "tflite" form's scratch is x1). */
#define MT_DWF_S1_LOOP_FLOOR                                                                                     \
    __asm__ volatile("1:\n\t" MT_DWF_S1_TAPS "ldrd  %[wa], %[wb], [%[pw], #%c[wcb]]\n\t"                        \
                     MT_DWF_STORE4(MT_ASM_REQUANT_FLOOR, "a0", "a1", "a2", "a3", "x1", "wa", "wb", "t")        \
                     MT_DWF_LOOP_END                                                                            \
                     : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [x0] "=&r"(x0),        \
                       [x1] "=&r"(x1), [wa] "=&r"(wa), [wb] "=&r"(wb), [px] "+r"(px), [ps] "+r"(ps),          \
                       [n] "+r"(n)                                                                              \
                     : [t] "r"(pw[2 * k + 2]), [pw] "r"(pw), [b] "r"(b), [kw] "n"(nv), [k] "n"(k),             \
                       [lwb] "n"(4 * MT_DWF_LW(kw)), [rwb] "n"(4 * (2 * k + 3)), [wcb] "n"(8 * k)              \
                     : "cc", "memory")

/* Stride 1, other zero points: the shift loaded per group, x1 the result, t the scratch. */
#define MT_DWF_S1_LOOP_FAST                                                                                      \
    __asm__ volatile("1:\n\t" MT_DWF_S1_TAPS "ldrd  %[wa], %[wb], [%[pw], #%c[wcb]]\n\t"                        \
                     "ldr   %[x0], [%[pw], #(%c[wcb] + 8)]\n\t"                                                 \
                     MT_DWF_STORE4(MT_ASM_REQUANT_FAST, "x1", "x1", "x1", "x1", "t", "wa", "wb", "x0")         \
                     MT_DWF_LOOP_END                                                                            \
                     : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [x0] "=&r"(x0),        \
                       [x1] "=&r"(x1), [wa] "=&r"(wa), [wb] "=&r"(wb), [t] "=&r"(t), [px] "+r"(px),           \
                       [ps] "+r"(ps), [n] "+r"(n)                                                               \
                     : [pw] "r"(pw), [b] "r"(b), [kw] "n"(nv), [k] "n"(k), [lwb] "n"(4 * MT_DWF_LW(kw)),     \
                       [rwb] "n"(4 * (2 * k + 3)), [wcb] "n"(8 * k)                                             \
                     : "cc", "memory")

/* Stride 2 in form REQ: the constants loaded per group into w0 ... w2, x0 the result, w3 the scratch. */
#define MT_DWF_S2_LOOP(REQ)                                                                                      \
    __asm__ volatile("1:\n\t" MT_DWF_S2_TAPS "ldrd  %[w0], %[w1], [%[pw], #%c[wcb]]\n\t"                        \
                     "ldr   %[w2], [%[pw], #(%c[wcb] + 8)]\n\t"                                                 \
                     MT_DWF_STORE4(REQ, "x0", "x0", "x0", "x0", "w3", "w0", "w1", "w2")                        \
                     MT_DWF_LOOP_END                                                                            \
                     : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [x0] "=&r"(x0),        \
                       [w0] "=&r"(wa), [w1] "=&r"(wb), [w2] "=&r"(x1), [w3] "=&r"(t), [px] "+r"(px),          \
                       [ps] "+r"(ps), [n] "+r"(n)                                                               \
                     : [pw] "r"(pw), [b] "r"(b), [kw] "n"(nv), [k] "n"(k), [lwb] "n"(4 * MT_DWF_LW(kw)),     \
                       [rwb] "n"(4 * (k + 3)), [wcb] "n"(4 * k)                                                 \
                     : "cc", "memory")
#endif /* MT_DSP_NATIVE */

/* `groups` groups of four outputs of one channel into the staging line ps (a byte every 4): px its
   ring slot 0 (slot r at px + r MT_DWF_LW(kw)), pw its weight table from the output row's start row,
   b its bias; the kernel rows of slots [0, nv) only (the others hold padding rows). The portable build
   computes the same sums with the emulated SMLAD. */
MT_INLINE void mt_dwf_groups(const int32_t *px, const int32_t *pw, int32_t b, int8_t *ps, int32_t n,
                             const int kw, const int k, const int s, const int mode, const int nv)
{
#if defined(MT_DSP_NATIVE)
    int32_t a0, a1, a2, a3, x0, x1, wa, wb, t;
    if (s == 1) {
        if (mode == MT_DW_REQ_FLOOR) {
            MT_DWF_S1_LOOP_FLOOR;
        } else {
            MT_DWF_S1_LOOP_FAST;
        }
    } else if (mode == MT_DW_REQ_FLOOR) {
        MT_DWF_S2_LOOP(MT_ASM_REQUANT_FLOOR);
    } else {
        MT_DWF_S2_LOOP(MT_ASM_REQUANT_FAST);
    }
    (void)a0, (void)a1, (void)a2, (void)a3, (void)x0, (void)x1, (void)wa, (void)wb, (void)t;
    (void)px, (void)ps, (void)n;
#else  /* !MT_DSP_NATIVE */
    const int32_t lw = MT_DWF_LW(kw), npair = s == 1 ? 2 * k : k;
    const int32_t rm = pw[npair], rc1 = pw[npair + 1], rsh = pw[npair + 2];
    int32_t g, q, r, m;
    for (g = 0; g < n; ++g, px += 2 * s, ps += 16) {
        for (q = 0; q < 4; ++q) {
            int32_t a = b, v;
            for (r = 0; r < nv; ++r) {
                for (m = 0; m < k; ++m) {
                    if (s == 1) { /* outputs 2i, 2i + 1 read X_{i + m} with A_m, B_m */
                        a = mt_smlad(px[r * lw + (q >> 1) + m], pw[r * (npair + 3) + 2 * m + (q & 1)], a);
                    } else {
                        a = mt_smlad(px[r * lw + q + m], pw[r * (npair + 3) + m], a);
                    }
                }
            }
            v = mode == MT_DW_REQ_FLOOR ? mt_requantize_floor(a, rm, rsh, rc1) : mt_requantize_fast(a, rm, rsh, rc1);
            ps[4 * q] = (int8_t)v;
        }
    }
#endif /* MT_DSP_NATIVE */
}

#if defined(MT_DSP_NATIVE)
#undef MT_DWF_S2_LOOP
#undef MT_DWF_S1_LOOP_FAST
#undef MT_DWF_S1_LOOP_FLOOR
#undef MT_DWF_LOOP_END
#undef MT_DWF_STORE4
#undef MT_DWF_REQ1
#undef MT_DWF_S2_TAPS
#undef MT_DWF_S2_MACS
#undef MT_DWF_S2_MAC
#undef MT_DWF_S1_TAPS
#undef MT_DWF_S1_STEP
#undef MT_DWF_X
#endif /* MT_DSP_NATIVE */

/* One input position of four channels (x) centred into column e of the four rows at r (`len` int16
   elements apart). */
MT_INLINE void mt_dwf_widen1(const int8_t *x, int32_t zz, int16_t *r, int32_t len)
{
    const int32_t v = mt_read_s8x4(x), a = mt_sxtab16(zz, v), b = mt_sxtab16_ror8(zz, v);
    r[0] = (int16_t)a;
    r[len] = (int16_t)b;
    r[2 * len] = (int16_t)(a >> 16);
    r[3 * len] = (int16_t)(b >> 16);
}

/*
 * Input row x (w positions of four channels, c_n bytes apart) widened and centred into the four
 * int16 rows at r (channel stride `len` elements), from column e on. Why not mt_dwr_widen: packing the
 * raw bytes first (PKHBT / PKHTB of two positions give channels 0, 1 and 2, 3 of both) leaves four
 * SXTAB16 per two positions instead of four SXTAB16 and four PKH, and four positions end on word
 * boundaries, so each row gets its two words by one STRD: 6 instructions per position of four
 * channels instead of 9. An odd e first takes one position alone, so the pairs are word aligned.
 */
MT_INLINE void mt_dwf_widen(const int8_t *x, int32_t w, int32_t c_n, int32_t zz, int16_t *r, int32_t e,
                            const int32_t len)
{
    int32_t *d;
    if (w > 0 && (e & 1)) {
        mt_dwf_widen1(x, zz, r + e, len);
        x += c_n, ++e, --w;
    }
    d = (int32_t *)(void *)(r + e);
    if (w >= 4) {
        const int32_t n4 = w / 4;
#if defined(MT_DSP_NATIVE)
        /* 23 instructions per four positions: GCC stored word by word (STRD reaches +-1020 bytes, so
           rows 0, 1 and 2, 3 each get a pointer) and spent 28 */
        int32_t *m01 = d, *m23 = d + len, v0, v1, v2, v3, t0, t1, i = n4;
        const int32_t cn3 = 3 * c_n;
        __asm__ volatile("1:\n\t"
                         "ldr     %[v0], [%[x]]\n\t"
                         "ldr     %[v1], [%[x], %[cn]]\n\t"
                         "ldr     %[v2], [%[x], %[cn], lsl #1]\n\t"
                         "ldr     %[v3], [%[x], %[cn3]]\n\t"
                         "add     %[x], %[x], %[cn], lsl #2\n\t"
                         "pkhbt   %[t0], %[v0], %[v1], lsl #16\n\t"
                         "pkhtb   %[v0], %[v1], %[v0], asr #16\n\t"
                         "pkhbt   %[t1], %[v2], %[v3], lsl #16\n\t"
                         "pkhtb   %[v2], %[v3], %[v2], asr #16\n\t"
                         "sxtab16 %[v1], %[zz], %[t0], ror #8\n\t"
                         "sxtab16 %[v3], %[zz], %[t1], ror #8\n\t"
                         "strd    %[v1], %[v3], [%[m01], #%c[cb]]\n\t"
                         "sxtab16 %[v1], %[zz], %[t0]\n\t"
                         "sxtab16 %[v3], %[zz], %[t1]\n\t"
                         "strd    %[v1], %[v3], [%[m01]], #8\n\t"
                         "sxtab16 %[t0], %[zz], %[v0], ror #8\n\t"
                         "sxtab16 %[t1], %[zz], %[v2], ror #8\n\t"
                         "strd    %[t0], %[t1], [%[m23], #%c[cb]]\n\t"
                         "sxtab16 %[t0], %[zz], %[v0]\n\t"
                         "sxtab16 %[t1], %[zz], %[v2]\n\t"
                         "strd    %[t0], %[t1], [%[m23]], #8\n\t"
                         "subs    %[i], %[i], #1\n\t"
                         "bne     1b"
                         : [v0] "=&r"(v0), [v1] "=&r"(v1), [v2] "=&r"(v2), [v3] "=&r"(v3), [t0] "=&r"(t0),
                           [t1] "=&r"(t1), [x] "+r"(x), [m01] "+r"(m01), [m23] "+r"(m23), [i] "+r"(i)
                         : [cn] "r"(c_n), [cn3] "r"(cn3), [zz] "r"(zz), [cb] "n"(2 * len)
                         : "cc", "memory");
        (void)v0, (void)v1, (void)v2, (void)v3, (void)t0, (void)t1;
        d = m01;
        w -= 4 * n4;
#else  /* !MT_DSP_NATIVE */
        const int32_t cw = len / 2;
        for (; w >= 4; w -= 4, x += 4 * c_n, d += 2) {
            const int32_t v0 = mt_read_s8x4(x), v1 = mt_read_s8x4(x + c_n);
            const int32_t v2 = mt_read_s8x4(x + 2 * c_n), v3 = mt_read_s8x4(x + 3 * c_n);
            const int32_t p01 = mt_pkhbt(v0, v1), q01 = mt_pkhtb(v0, v1); /* channels 0, 1 and 2, 3 of both */
            const int32_t p23 = mt_pkhbt(v2, v3), q23 = mt_pkhtb(v2, v3);
            d[0] = mt_sxtab16(zz, p01);
            d[1] = mt_sxtab16(zz, p23);
            d[cw] = mt_sxtab16_ror8(zz, p01);
            d[cw + 1] = mt_sxtab16_ror8(zz, p23);
            d[2 * cw] = mt_sxtab16(zz, q01);
            d[2 * cw + 1] = mt_sxtab16(zz, q23);
            d[3 * cw] = mt_sxtab16_ror8(zz, q01);
            d[3 * cw + 1] = mt_sxtab16_ror8(zz, q23);
        }
        (void)n4;
#endif /* MT_DSP_NATIVE */
    }
    if (w >= 2) {
        const int32_t v0 = mt_read_s8x4(x), v1 = mt_read_s8x4(x + c_n);
        const int32_t p01 = mt_pkhbt(v0, v1), q01 = mt_pkhtb(v0, v1);
        d[0] = mt_sxtab16(zz, p01);
        d[len / 2] = mt_sxtab16_ror8(zz, p01);
        d[len] = mt_sxtab16(zz, q01);
        d[3 * len / 2] = mt_sxtab16_ror8(zz, q01);
        x += 2 * c_n, w -= 2, ++d;
    }
    if (w > 0) {
        mt_dwf_widen1(x, zz, (int16_t *)(void *)d, len);
    }
}

/* n words at p zeroed inline (a padding row is a few dozen words; newlib's memset took ~130
   instructions for 88 bytes). The empty asm hides the zero from GCC, which would call memset. */
MT_INLINE void mt_dwf_zero(int32_t *p, int32_t n)
{
#if defined(MT_DSP_NATIVE)
    int32_t z = 0;
    __asm__("" : "+r"(z));
    for (; n > 0; --n) {
        *p++ = z;
    }
#else  /* !MT_DSP_NATIVE */
    memset(p, 0, (size_t)n * sizeof(int32_t));
#endif /* MT_DSP_NATIVE */
}

/* Input row iy of channels [c0, c0 + 4) into ring slot `at` = iy mod kw (the len elements a group reads of a
   padding row zero; the padding columns of an image row stay zero from mt_dwf_zero_pads). */
MT_INLINE void mt_dwf_fill(int32_t *buf, int32_t iy, int32_t at, const int8_t *image, int32_t h, int32_t w,
                           int32_t c_n, int32_t zz, int32_t pad_left, int32_t kw, int32_t len)
{
    const int32_t lw = MT_DWF_LW(kw);
    int32_t *slot = buf + at * lw; /* at: iy mod kw, from the caller's running start */
    int32_t ch;
    if (iy >= 0 && iy < h) {
        mt_dwf_widen(image + iy * w * c_n, w, c_n, zz, (int16_t *)(void *)slot, pad_left, 2 * kw * lw);
    } else {
        for (ch = 0; ch < 4; ++ch) {
            mt_dwf_zero(slot + ch * kw * lw, len / 2);
        }
    }
}

/* The padding columns [0, pad_left) and [pad_left + w, len) of every slot of the four channels zeroed,
   in whole words (once per call, before any row is widened: image rows only ever write the columns
   between, a word shared with the image's first or last column included). */
MT_INLINE void mt_dwf_zero_pads(int32_t *buf, const int kw, int32_t pad_left, int32_t w, int32_t len)
{
    const int32_t lw = MT_DWF_LW(kw), left = (pad_left + 1) / 2, right = (pad_left + w) / 2, half = len / 2;
    int32_t z = 0, e;
    int line;
#if defined(MT_DSP_NATIVE)
    __asm__("" : "+r"(z)); /* hides the zero from GCC, which would call memset */
#endif /* MT_DSP_NATIVE */
    for (e = 0; e < half; ++e) { /* column-major: the 4 kw lines of a column are constant offsets apart */
        if (e == left) {
            e = right;
            if (e >= half) {
                break;
            }
        }
        MT_DWR_UNROLL
        for (line = 0; line < 4 * kw; ++line) {
            buf[line * lw + e] = z;
        }
    }
}

/* The staging line's wo positions (four channels a word) clamped to act_max and stored, c_n bytes apart:
   four positions per step, 17 instructions in the native assembly (GCC's loop took 26). */
MT_INLINE void mt_dwf_store(const int32_t *stage, int32_t wo, int8_t *y, int32_t c_n, int32_t hi4)
{
#if defined(MT_DSP_NATIVE)
    if (wo >= 4) {
        int32_t s0, s1, s2, s3, t, i = wo / 4;
        const int32_t cn3 = 3 * c_n;
        __asm__ volatile("1:\n\t"
                         "ldrd    %[s0], %[s1], [%[st]], #16\n\t"
                         "ldrd    %[s2], %[s3], [%[st], #-8]\n\t"
                         "ssub8   %[t], %[s0], %[hi]\n\t"
                         "sel     %[s0], %[hi], %[s0]\n\t"
                         "ssub8   %[t], %[s1], %[hi]\n\t"
                         "sel     %[s1], %[hi], %[s1]\n\t"
                         "ssub8   %[t], %[s2], %[hi]\n\t"
                         "sel     %[s2], %[hi], %[s2]\n\t"
                         "ssub8   %[t], %[s3], %[hi]\n\t"
                         "sel     %[s3], %[hi], %[s3]\n\t"
                         "str     %[s0], [%[y]]\n\t"
                         "str     %[s1], [%[y], %[cn]]\n\t"
                         "str     %[s2], [%[y], %[cn], lsl #1]\n\t"
                         "str     %[s3], [%[y], %[cn3]]\n\t"
                         "add     %[y], %[y], %[cn], lsl #2\n\t"
                         "subs    %[i], %[i], #1\n\t"
                         "bne     1b"
                         : [s0] "=&r"(s0), [s1] "=&r"(s1), [s2] "=&r"(s2), [s3] "=&r"(s3), [t] "=&r"(t),
                           [st] "+r"(stage), [y] "+r"(y), [i] "+r"(i)
                         : [cn] "r"(c_n), [cn3] "r"(cn3), [hi] "r"(hi4)
                         : "cc", "memory");
        (void)s0, (void)s1, (void)s2, (void)s3, (void)t;
        wo &= 3;
    }
#endif /* MT_DSP_NATIVE */
    for (; wo > 0; --wo, ++stage, y += c_n) {
        mt_write_s8x4(y, mt_dwf_min_s8x4(stage[0], hi4));
    }
}

/* One output row of the four channels over nv kernel rows (constant here): mt_dwf_groups per channel. */
MT_INLINE void mt_dwf_row4_nv(const int32_t *px, const int32_t *pw, const int32_t *b, int8_t *ps, int32_t groups,
                              const int kw, const int k, const int s, int mode, const int nv)
{
    const int32_t lw = MT_DWF_LW(kw), tw = (2 * kw - 1) * ((s == 1 ? 2 * k : k) + 3);
    int ch;
#define MT_DWF_CH(CH)                                                                                            \
    do {                                                                                                         \
        if (mode == MT_DW_REQ_FLOOR) {                                                                           \
            mt_dwf_groups(px + (CH) * kw * lw, pw + (CH) * tw, b[CH], ps + (CH), groups, kw, k, s, MT_DW_REQ_FLOOR, nv); \
        } else {                                                                                                 \
            mt_dwf_groups(px + (CH) * kw * lw, pw + (CH) * tw, b[CH], ps + (CH), groups, kw, k, s, MT_DW_REQ_FAST, nv); \
        }                                                                                                        \
    } while (0)
    if (nv == kw) { /* every row but the padded ones: the four channels unrolled (constant offsets) */
        MT_DWF_CH(0);
        MT_DWF_CH(1);
        MT_DWF_CH(2);
        MT_DWF_CH(3);
    } else {
        for (ch = 0; ch < 4; ++ch) {
            MT_DWF_CH(ch);
        }
    }
#undef MT_DWF_CH
}

/* mt_dwf_row4_nv with nv in [k, kw] as a constant (one copy of the loops each). */
MT_INLINE void mt_dwf_row4(const int32_t *px, const int32_t *pw, const int32_t *b, int8_t *ps, int32_t groups,
                           const int kw, const int k, const int s, int mode, int32_t nv)
{
    if (nv == kw) {
        mt_dwf_row4_nv(px, pw, b, ps, groups, kw, k, s, mode, kw);
    } else if (nv == kw - 1) {
        mt_dwf_row4_nv(px, pw, b, ps, groups, kw, k, s, mode, kw - 1);
    } else if (kw > 3 && nv == kw - 2) {
        mt_dwf_row4_nv(px, pw, b, ps, groups, kw, k, s, mode, kw > 3 ? kw - 2 : kw);
    } else {
        mt_dwf_row4_nv(px, pw, b, ps, groups, kw, k, s, mode, kw > 5 ? kw - 3 : kw);
    }
}

/* The channel quads [c0, c0 + 4), [c0 + 4, c0 + 8) ... below c_end over every output position (mt_dwr_fits
   holds) in requantization form `mode`, without extremes: the ring of widened rows, the fused group loop,
   the per-row store. The kernel width and stride are constants (one copy per pair: no dispatch per
   channel and output row); the quads share one call (its set-up and the padding columns' zeroing). */
MT_INLINE void mt_dwf_quad_ks(const mt_conv_params *p, const mt_per_channel_quant *q, const mt_dims *in_d,
                              const int8_t *input, const mt_dims *f_d, const int8_t *filter, const int32_t *bias,
                              const mt_dims *out_d, int8_t *output, int32_t c0, int32_t c_end, int mode,
                              const int kw, const int s)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c, wo = out_d->w;
    const int k = kw / 2 + 1, lw = MT_DWF_LW(kw), rw = (s == 1 ? 2 * k : k) + 3, tw = (2 * kw - 1) * rw;
    const int32_t groups = (wo + 3) / 4;
    const int32_t len = mt_dwr_row_len(p, in_d, f_d, out_d);
    const int32_t zz = (int32_t)(((uint32_t)(-p->input_zero_point) & 0xFFFFu) | ((uint32_t)(-p->input_zero_point) << 16));
    const int32_t hi4 = (int32_t)(((uint32_t)p->act_max & 0xFFu) * 0x01010101u);
    int32_t buf[MT_DWR_WORDS];
    int32_t wt[MT_DWF_TABLE];
    int32_t stage[MT_DWR_LINE];
    int32_t n, oy, ch, i;
    mt_dwf_zero_pads(buf, kw, p->pad_left, w, len); /* image rows never write these columns */
    for (; c0 + 4 <= c_end; c0 += 4) {
        for (ch = 0; ch < 4; ++ch) {
            const int32_t c = c0 + ch, sh = mt_requant_sh(q->shift[c]);
            mt_dwf_table(filter + c * kw * kw, kw, k, s, mt_requant_mult(q->multiplier[c]),
                         mt_requant_c1(sh, p->output_zero_point), sh, wt + ch * tw);
        }
        for (n = 0; n < in_d->n; ++n) {
            const int8_t *image = input + n * h * w * c_n + c0;
            /* (-iy0) mod kw, iy0 = oy s - pad_top: the window's first slot is kw - start */
            int32_t start = p->pad_top % kw;
            for (oy = 0; oy < out_d->h; ++oy, start = start >= s ? start - s : start - s + kw) {
                const int32_t iy0 = oy * s - p->pad_top;
                int8_t *y = output + ((n * out_d->h + oy) * wo) * c_n + c0;
                for (i = oy == 0 ? 0 : kw - s; i < kw; ++i) { /* window row i sits in slot (i - start) mod kw */
                    mt_dwf_fill(buf, iy0 + i, i >= start ? i - start : i - start + kw, image, h, w, c_n, zz,
                                p->pad_left, kw, len);
                }
                {
                    /* the window's image rows lie in the slots [a, a + nv) when they do not wrap round the
                       ring (always so under top padding, where input row 0 is in slot 0): only those run */
                    const int32_t lo = iy0 < 0 ? -iy0 : 0, hi = h - iy0 < kw ? h - iy0 : kw;
                    int32_t a = iy0 < 0 ? 0 : kw - start, nv = hi - lo;
                    a = a == kw ? 0 : a;
                    /* 3x3: one row of three saved, less than the copies cost; a wrapped window; fewer rows
                       than the copies take */
                    if (kw == 3 || a + nv > kw || nv < k) {
                        a = 0, nv = kw; /* the padding rows are zero slots: all kw rows give the same sums */
                    }
                    mt_dwf_row4(buf + a * lw, wt + (start + a) * rw, bias + c0, (int8_t *)(void *)stage, groups, kw,
                                k, s, mode, nv);
                }
                mt_dwf_store(stage, wo, y, c_n, hi4);
            }
        }
    }
}

/* mt_dwf_quad_ks with the layer's kernel width and stride: the channel quads from c0 below c_end. */
MT_INLINE void mt_dwf_quad(const mt_conv_params *p, const mt_per_channel_quant *q, const mt_dims *in_d,
                           const int8_t *input, const mt_dims *f_d, const int8_t *filter, const int32_t *bias,
                           const mt_dims *out_d, int8_t *output, int32_t c0, int32_t c_end, int mode)
{
    const int32_t kw = f_d->w, s = p->stride_w;
    if (kw == 3) {
        if (s == 1) {
            mt_dwf_quad_ks(p, q, in_d, input, f_d, filter, bias, out_d, output, c0, c_end, mode, 3, 1);
        } else {
            mt_dwf_quad_ks(p, q, in_d, input, f_d, filter, bias, out_d, output, c0, c_end, mode, 3, 2);
        }
    } else if (kw == 5) {
        if (s == 1) {
            mt_dwf_quad_ks(p, q, in_d, input, f_d, filter, bias, out_d, output, c0, c_end, mode, 5, 1);
        } else {
            mt_dwf_quad_ks(p, q, in_d, input, f_d, filter, bias, out_d, output, c0, c_end, mode, 5, 2);
        }
    } else if (s == 1) {
        mt_dwf_quad_ks(p, q, in_d, input, f_d, filter, bias, out_d, output, c0, c_end, mode, 7, 1);
    } else {
        mt_dwf_quad_ks(p, q, in_d, input, f_d, filter, bias, out_d, output, c0, c_end, mode, 7, 2);
    }
}

#endif /* MT_DSP */

#endif /* MT_DEPTHWISE_ROWS_DSP_H */
