/*
 * Conv forward with per-channel accumulator extremes (FQT; Python twin: fqt_kernels.conv2d_fwd_acc,
 * the bias add and requantize_output, with fqt._acc_range reading the extremes).
 * Plain loops (mt_conv2d_fwd_s8_range_ref.h): padding holds real 0, i.e. a centred 0, so
 * out-of-bounds taps are skipped; with a scratch of 2 * K bytes (the planner's conv scratch of DSP
 * builds) an im2col column per position. m0/mt_conv2d_fwd_s8_range.c is its ARMv6-M twin.
 * NOTE: |acc| <= |b| + 255 * sum|w| < 2^31: the exporter bounds the bias by the same room
 * (fqt._bias_room), so the int32 accumulator cannot overflow.
 */
#include <string.h>

#include "mt_arch.h"
#include "mt_conv2d_fwd_s8_range_ref.h"
#include "mt_conv_c1.h"
#include "mt_conv_fwd_pairs.h"
#include "mt_fixedpoint.h"
#include "mt_fqt.h"
#include "mt_support.h"

/*
 * One int16 im2col column (x - z_x, padding 0) of output position (b, y, x); with DSP in SMLAD order
 * ((c0, c2), (c1, c3) per group of four). NOTE: |x - z_x| <= 255 fits int16.
 */
static void col_fill(const mt_conv_params *params,
                     const mt_dims *input_dims,
                     const int8_t *input,
                     const mt_dims *filter_dims,
                     int32_t b,
                     int32_t y,
                     int32_t x,
                     int16_t *col)
{
    const int32_t hi_ = input_dims->h, wi = input_dims->w, ci = input_dims->c;
    const int32_t kh = filter_dims->h, kw = filter_dims->w;
    const int32_t zx = params->input_zero_point;
    int16_t *pc = col;
    int32_t i, j, c;
#if MT_DSP
    if ((ci & 3) == 0) { /* whole words: LDR, SXTAB16 twice (x - z_x), two stores: already SMLAD order */
        const int32_t nz = (int32_t)(((uint32_t)(-zx) & 0xFFFFu) * 0x10001u);
        for (i = 0; i < kh; ++i) {
            const int32_t iy = y * params->stride_h - params->pad_top + i;
            for (j = 0; j < kw; ++j) {
                const int32_t ix = x * params->stride_w - params->pad_left + j;
                if (iy < 0 || iy >= hi_ || ix < 0 || ix >= wi) {
                    memset(pc, 0, (size_t)ci * 2u);
                    pc += ci;
                } else {
                    const int8_t *px = input + ((b * hi_ + iy) * wi + ix) * ci;
                    for (c = 0; c < ci; c += 4) {
                        const int32_t v = mt_read_s8x4(px + c);
                        mt_write_s16x2(pc, mt_sxtab16(nz, v));
                        mt_write_s16x2(pc + 2, mt_sxtab16_ror8(nz, v));
                        pc += 4;
                    }
                }
            }
        }
        return;
    }
#endif /* MT_DSP */
    for (i = 0; i < kh; ++i) {
        const int32_t iy = y * params->stride_h - params->pad_top + i;
        for (j = 0; j < kw; ++j) {
            const int32_t ix = x * params->stride_w - params->pad_left + j;
            if (iy < 0 || iy >= hi_ || ix < 0 || ix >= wi) {
                for (c = 0; c < ci; ++c) {
                    *pc++ = 0;
                }
            } else {
                const int8_t *px = input + ((b * hi_ + iy) * wi + ix) * ci;
                for (c = 0; c < ci; ++c) {
                    *pc++ = (int16_t)((int32_t)px[c] - zx);
                }
            }
        }
    }
#if MT_DSP
    mt_reorder_s16(col, kh * kw * ci); /* SMLAD order: (c0, c2), (c1, c3) per group of four */
#endif /* MT_DSP */
}

/* Range and requantized output of one accumulator of channel o. */
MT_INLINE int8_t out_one(const mt_conv_params *params,
                         const mt_per_channel_quant *quant,
                         int32_t o,
                         int32_t acc,
                         int32_t *acc_min,
                         int32_t *acc_max)
{
    acc_min[o] = acc < acc_min[o] ? acc : acc_min[o];
    acc_max[o] = acc > acc_max[o] ? acc : acc_max[o];
    return mt_requantize(acc, quant->multiplier[o], quant->shift[o], params->output_zero_point, params->act_min,
                         params->act_max);
}

#if MT_DSP
/*
 * Requantization of channel o prepared for a block (mt_requantize_fast where its shift allows,
 * then the activation clamp: clamp(clamp(y, -128, 127), lo, hi) == clamp(y, lo, hi) for a clamp
 * inside the int8 range).
 */
typedef struct {
    int32_t m, sh, c1, fast;
} rq_chan;

MT_INLINE rq_chan rq_prepare(const mt_conv_params *params, const mt_per_channel_quant *quant, int32_t o)
{
    rq_chan r;
    r.m = quant->multiplier[o];
    r.fast = mt_requant_fast_ok(r.m, quant->shift[o]);
    r.sh = mt_requant_sh(quant->shift[o]);
    r.c1 = r.fast ? mt_requant_c1(r.sh, params->output_zero_point) : 0;
    return r;
}

MT_INLINE int8_t rq_apply(const mt_conv_params *params, const mt_per_channel_quant *quant, const rq_chan *r,
                          int32_t o, int32_t acc)
{
    int32_t y;
    if (!r->fast) {
        return mt_requantize(acc, r->m, quant->shift[o], params->output_zero_point, params->act_min,
                             params->act_max);
    }
    y = mt_requantize_fast(acc, mt_requant_mult(r->m), r->sh, r->c1);
    y = y < params->act_min ? params->act_min : y;
    return (int8_t)(y > params->act_max ? params->act_max : y);
}

#if defined(__GNUC__)
#define MT_NOINLINE_R __attribute__((noinline))
#else  /* !defined(__GNUC__) */
#define MT_NOINLINE_R
#endif /* __GNUC__ */

/*
 * s[0..3] (row a x column 0, row a x column 1, row b x column 0, row b x column 1) += n4 > 0 groups
 * of four k, with row b = wa + kk and column 1 = c0 + kk: per group 4 column loads, 2 weight loads,
 * 4 SXTB16, 8 SMLAD and the loop, 20 instructions for 16 MACs. NOTE: out of line and, on the native
 * core, in assembly: the loop needs all 14 usable registers (4 accumulators, 2 pointers, the offset
 * kk, a counter, 6 temporaries; the second row and column are reached through the offset), which
 * GCC does not allocate from C without spilling; the C branch is the same computation.
 */
static MT_NOINLINE_R void dot_2x2_off(const int8_t *wa, const int16_t *c0, int32_t kk, int32_t n4, int32_t *s)
{
    int32_t a0 = s[0], a1 = s[1], b0 = s[2], b1 = s[3];
#if defined(MT_DSP_NATIVE)
    int32_t x0, x1, y0, y1, t, u;
    __asm__ volatile("1:\n\t"
                     "ldr    %[y0], [%[c], %[kk], lsl #1]\n\t"
                     "ldr    %[x0], [%[c]], #4\n\t"
                     "ldr    %[y1], [%[c], %[kk], lsl #1]\n\t"
                     "ldr    %[x1], [%[c]], #4\n\t"
                     "ldr    %[t], [%[w], %[kk]]\n\t"
                     "sxtb16 %[u], %[t], ror #8\n\t"
                     "sxtb16 %[t], %[t]\n\t"
                     "smlad  %[b0], %[t], %[x0], %[b0]\n\t"
                     "smlad  %[b0], %[u], %[x1], %[b0]\n\t"
                     "smlad  %[b1], %[t], %[y0], %[b1]\n\t"
                     "smlad  %[b1], %[u], %[y1], %[b1]\n\t"
                     "ldr    %[t], [%[w]], #4\n\t"
                     "sxtb16 %[u], %[t], ror #8\n\t"
                     "sxtb16 %[t], %[t]\n\t"
                     "smlad  %[a0], %[t], %[x0], %[a0]\n\t"
                     "smlad  %[a0], %[u], %[x1], %[a0]\n\t"
                     "smlad  %[a1], %[t], %[y0], %[a1]\n\t"
                     "smlad  %[a1], %[u], %[y1], %[a1]\n\t"
                     "subs   %[n], %[n], #1\n\t"
                     "bne    1b"
                     : [a0] "+r"(a0), [a1] "+r"(a1), [b0] "+r"(b0), [b1] "+r"(b1), [w] "+r"(wa), [c] "+r"(c0),
                       [n] "+r"(n4), [x0] "=&r"(x0), [x1] "=&r"(x1), [y0] "=&r"(y0), [y1] "=&r"(y1),
                       [t] "=&r"(t), [u] "=&r"(u)
                     : [kk] "r"(kk)
                     : "cc", "memory");
#else  /* !defined(MT_DSP_NATIVE) */
    const int8_t *wb = wa + kk;
    const int16_t *c1 = c0 + kk;
    for (; n4 > 0; --n4) {
        const int32_t wa4 = mt_read_s8x4(wa), wb4 = mt_read_s8x4(wb);
        const int32_t wa02 = mt_sxtb16(wa4), wa13 = mt_sxtb16_ror8(wa4);
        const int32_t wb02 = mt_sxtb16(wb4), wb13 = mt_sxtb16_ror8(wb4);
        const int32_t x002 = mt_read_s16x2(c0), x013 = mt_read_s16x2(c0 + 2);
        const int32_t x102 = mt_read_s16x2(c1), x113 = mt_read_s16x2(c1 + 2);
        a0 = mt_smlad(wa13, x013, mt_smlad(wa02, x002, a0));
        a1 = mt_smlad(wa13, x113, mt_smlad(wa02, x102, a1));
        b0 = mt_smlad(wb13, x013, mt_smlad(wb02, x002, b0));
        b1 = mt_smlad(wb13, x113, mt_smlad(wb02, x102, b1));
        wa += 4;
        wb += 4;
        c0 += 4;
        c1 += 4;
    }
#endif /* MT_DSP_NATIVE */
    s[0] = a0;
    s[1] = a1;
    s[2] = b0;
    s[3] = b1;
}

/*
 * Two columns (positions) times the weight rows, two rows at a time: per four k, two weight words
 * widened by SXTB16 (four registers), four column words, eight SMLAD (16 MACs); a last odd row
 * alone. c1 must be c0 + kk (conv_col's two columns): the full groups reach it through that offset.
 * NOTE: each sum is exact in int32 (the bound above holds in any order).
 */
static void gemm_2col(const mt_conv_params *params,
                      const mt_per_channel_quant *quant,
                      const int8_t *filter,
                      const int32_t *bias,
                      int32_t o_n,
                      int32_t kk,
                      const int16_t *c0,
                      const int16_t *c1,
                      int8_t *out0,
                      int8_t *out1,
                      int32_t *acc_min,
                      int32_t *acc_max)
{
    int32_t o = 0;
    for (; o + 2 <= o_n; o += 2) {
        const int8_t *wa = filter + o * kk;
        const int8_t *wb = wa + kk;
        int32_t a0, a1, b0, b1;
        int32_t k = kk & ~3;
        rq_chan ra, rb;
        int32_t s4[4];
        s4[0] = s4[1] = bias[o];
        s4[2] = s4[3] = bias[o + 1];
        if (k > 0) {
            dot_2x2_off(wa, c0, kk, k >> 2, s4); /* c1 == c0 + kk: conv_col's two columns */
        }
        a0 = s4[0];
        a1 = s4[1];
        b0 = s4[2];
        b1 = s4[3];
        for (; k < kk; ++k) {
            a0 += (int32_t)c0[k] * wa[k];
            a1 += (int32_t)c1[k] * wa[k];
            b0 += (int32_t)c0[k] * wb[k];
            b1 += (int32_t)c1[k] * wb[k];
        }
        acc_min[o] = a0 < acc_min[o] ? a0 : acc_min[o];
        acc_min[o] = a1 < acc_min[o] ? a1 : acc_min[o];
        acc_max[o] = a0 > acc_max[o] ? a0 : acc_max[o];
        acc_max[o] = a1 > acc_max[o] ? a1 : acc_max[o];
        acc_min[o + 1] = b0 < acc_min[o + 1] ? b0 : acc_min[o + 1];
        acc_min[o + 1] = b1 < acc_min[o + 1] ? b1 : acc_min[o + 1];
        acc_max[o + 1] = b0 > acc_max[o + 1] ? b0 : acc_max[o + 1];
        acc_max[o + 1] = b1 > acc_max[o + 1] ? b1 : acc_max[o + 1];
        ra = rq_prepare(params, quant, o);
        rb = rq_prepare(params, quant, o + 1);
        out0[o] = rq_apply(params, quant, &ra, o, a0);
        out1[o] = rq_apply(params, quant, &ra, o, a1);
        out0[o + 1] = rq_apply(params, quant, &rb, o + 1, b0);
        out1[o + 1] = rq_apply(params, quant, &rb, o + 1, b1);
    }
    for (; o < o_n; ++o) {
        const int8_t *wa = filter + o * kk;
        int32_t a0 = bias[o], a1 = bias[o];
        int32_t k = 0;
        for (; k + 4 <= kk; k += 4) {
            const int32_t wa4 = mt_read_s8x4(wa + k);
            const int32_t wa02 = mt_sxtb16(wa4), wa13 = mt_sxtb16_ror8(wa4);
            a0 = mt_smlad(wa02, mt_read_s16x2(c0 + k), a0);
            a0 = mt_smlad(wa13, mt_read_s16x2(c0 + k + 2), a0);
            a1 = mt_smlad(wa02, mt_read_s16x2(c1 + k), a1);
            a1 = mt_smlad(wa13, mt_read_s16x2(c1 + k + 2), a1);
        }
        for (; k < kk; ++k) {
            a0 += (int32_t)c0[k] * wa[k];
            a1 += (int32_t)c1[k] * wa[k];
        }
        out0[o] = out_one(params, quant, o, a0, acc_min, acc_max);
        out1[o] = out_one(params, quant, o, a1, acc_min, acc_max);
    }
}
#endif /* MT_DSP */

#if MT_DSP && MT_ROUNDING_TFLITE
/*
 * acc + the dot product of the first n k (n a multiple of 4) of weight row wr and column col (SMLAD
 * order): per four k one weight word widened by SXTB16 twice, two column words, two SMLAD; conv_col's
 * loop for one position, out of line in mode "tflite" only. NOTE: inlined, the general requantization
 * after it (mt_requantize_tflite in out_one: a 64-bit product, two roundings, the sign restored)
 * keeps so many values live across the loop that GCC spills the weight pointer and both column
 * words in it: 17 instructions per four k on the M7 against 11 in mode "single". Out of line the
 * loop has the registers to itself (10 instructions) for one call per output. Mode "single" keeps
 * its inline loop (the same code as before this function existed).
 */
static MT_NOINLINE int32_t dot_col(const int8_t *wr, const int16_t *col, int32_t n, int32_t acc)
{
    int32_t k;
    for (k = 0; k < n; k += 4) {
        const int32_t w4 = mt_read_s8x4(wr + k);
        acc = mt_smlad(mt_sxtb16(w4), mt_read_s16x2(col + k), acc);
        acc = mt_smlad(mt_sxtb16_ror8(w4), mt_read_s16x2(col + k + 2), acc);
    }
    return acc;
}
#endif /* MT_DSP && MT_ROUNDING_TFLITE */

/*
 * Dense convs with a scratch of 2 * K bytes: one int16 im2col column per output position, then a
 * dot product per output channel (no bounds checks in the inner loop; with DSP, SMLAD on the column
 * in SMLAD order). DSP with 4 * K bytes: two positions at a time through gemm_2col.
 */
static void conv_col(const mt_conv_params *params,
                     const mt_per_channel_quant *quant,
                     const mt_dims *input_dims,
                     const int8_t *input,
                     const mt_dims *filter_dims,
                     const int8_t *filter,
                     const int32_t *bias,
                     const mt_dims *output_dims,
                     int8_t *output,
                     int32_t *acc_min,
                     int32_t *acc_max,
                     int16_t *col,
                     int32_t col_bytes)
{
    const int32_t o_n = filter_dims->n;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t kk = filter_dims->h * filter_dims->w * input_dims->c;
    const int32_t npos = input_dims->n * ho * wo;
    int32_t pos = 0, o;
    (void)col_bytes;
#if MT_DSP
    if (col_bytes >= 4 * kk) {
        int16_t *col1 = col + kk;
        for (; pos + 2 <= npos; pos += 2) {
            const int32_t q = pos + 1;
            col_fill(params, input_dims, input, filter_dims, pos / (ho * wo), pos / wo % ho, pos % wo, col);
            col_fill(params, input_dims, input, filter_dims, q / (ho * wo), q / wo % ho, q % wo, col1);
            gemm_2col(params, quant, filter, bias, o_n, kk, col, col1, output + pos * o_n, output + q * o_n,
                      acc_min, acc_max);
        }
    }
#endif /* MT_DSP */
    for (; pos < npos; ++pos) {
        int8_t *out = output + pos * o_n;
        col_fill(params, input_dims, input, filter_dims, pos / (ho * wo), pos / wo % ho, pos % wo, col);
        for (o = 0; o < o_n; ++o) {
            const int8_t *wr = filter + o * kk;
            int32_t acc = bias[o];
            int32_t k = 0;
#if MT_DSP && MT_ROUNDING_TFLITE
            k = kk & ~3;
            acc = dot_col(wr, col, k, acc); /* out of line in mode "tflite": see dot_col */
#elif MT_DSP
            /* 4 MACs: one weight word widened by SXTB16 twice, two column words, two SMLAD */
            for (; k + 4 <= kk; k += 4) {
                const int32_t w4 = mt_read_s8x4(wr + k);
                acc = mt_smlad(mt_sxtb16(w4), mt_read_s16x2(col + k), acc);
                acc = mt_smlad(mt_sxtb16_ror8(w4), mt_read_s16x2(col + k + 2), acc);
            }
#endif /* MT_DSP && MT_ROUNDING_TFLITE / MT_DSP */
            for (; k < kk; ++k) {
                acc += (int32_t)col[k] * wr[k];
            }
            out[o] = out_one(params, quant, o, acc, acc_min, acc_max);
        }
    }
}

mt_status mt_conv2d_fwd_s8_range(const mt_context *ctx,
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
    const int32_t ci = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w, cig = filter_dims->c;
    const int32_t groups = params->groups;
    if (!params || !quant || !input || !filter || !bias || !output || !acc_min || !acc_max || groups < 1 ||
        cig * groups != ci || output_dims->c != o_n) {
        return MT_ERR_ARG;
    }
#if MT_DSP
    if (mt_conv_c1_fwd(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output, acc_min,
                       acc_max)) {
        return MT_OK; /* one input channel: the short reduction in registers (mt_conv_c1.h) */
    }
    if (mt_conv_fwd_pairs(ctx, params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output,
                          acc_min, acc_max)) {
        return MT_OK; /* C a multiple of 4: interleaved column pairs, requantization in the loop */
    }
#endif /* MT_DSP */
    if (groups == 1 && ctx && ctx->buf && ctx->size >= 2 * kh * kw * cig) {
        conv_col(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output, acc_min, acc_max,
                 (int16_t *)ctx->buf, ctx->size);
        return MT_OK;
    }
    mt_conv2d_fwd_s8_range_ref(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output,
                               acc_min, acc_max);
    return MT_OK;
}
