/*
 * Conv forward with per-channel accumulator extremes (FQT; Python twin: fqt_kernels.conv2d_fwd_acc,
 * the bias add and requantize_output, with fqt._acc_range reading the extremes).
 * Plain loops: padding holds real 0, i.e. a centred 0, so out-of-bounds taps are skipped; with a
 * scratch of 2 * K bytes (the planner's conv scratch of DSP builds) an im2col column per position.
 * NOTE: |acc| <= |b| + 255 * sum|w| < 2^31: the exporter bounds the bias by the same room
 * (fqt._bias_room), so the int32 accumulator cannot overflow.
 */
#include "mt_arch.h"
#include "mt_fixedpoint.h"
#include "mt_fqt.h"
#include "mt_support.h"

/*
 * Dense convs with a scratch of 2 * K bytes: one int16 im2col column (x - z_x, padding 0) per output
 * position, then a dot product per output channel (no bounds checks in the inner loop; with DSP,
 * SMLAD on the column in SMLAD order). NOTE: |x - z_x| <= 255 fits int16; the sums are exact int32.
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
                     int16_t *col)
{
    const int32_t hi_ = input_dims->h, wi = input_dims->w, ci = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w, kk = kh * kw * ci;
    const int32_t zx = params->input_zero_point;
    int32_t b, y, x, o, i, j, c;
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                int8_t *out = output + ((b * ho + y) * wo + x) * o_n;
                int16_t *pc = col;
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
                mt_reorder_s16(col, kk); /* SMLAD order: (c0, c2), (c1, c3) per group of four */
#endif /* MT_DSP */
                for (o = 0; o < o_n; ++o) {
                    const int8_t *wr = filter + o * kk;
                    int32_t acc = bias[o];
                    int32_t k = 0;
#if MT_DSP
                    /* 4 MACs: one weight word widened by SXTB16 twice, two column words, two SMLAD */
                    for (; k + 4 <= kk; k += 4) {
                        const int32_t w4 = mt_read_s8x4(wr + k);
                        acc = mt_smlad(mt_sxtb16(w4), mt_read_s16x2(col + k), acc);
                        acc = mt_smlad(mt_sxtb16_ror8(w4), mt_read_s16x2(col + k + 2), acc);
                    }
#endif /* MT_DSP */
                    for (; k < kk; ++k) {
                        acc += (int32_t)col[k] * wr[k];
                    }
                    acc_min[o] = acc < acc_min[o] ? acc : acc_min[o];
                    acc_max[o] = acc > acc_max[o] ? acc : acc_max[o];
                    out[o] = mt_requantize(acc, quant->multiplier[o], quant->shift[o], params->output_zero_point,
                                           params->act_min, params->act_max);
                }
            }
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
    const int32_t hi_ = input_dims->h, wi = input_dims->w, ci = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w, cig = filter_dims->c;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t groups = params->groups;
    const int32_t opg = groups > 0 ? o_n / groups : 0;
    const int32_t zx = params->input_zero_point;
    int32_t b, y, x, o;
    if (!params || !quant || !input || !filter || !bias || !output || !acc_min || !acc_max || groups < 1 ||
        cig * groups != ci || output_dims->c != o_n) {
        return MT_ERR_ARG;
    }
    if (groups == 1 && ctx && ctx->buf && ctx->size >= 2 * kh * kw * cig) {
        conv_col(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output, acc_min, acc_max,
                 (int16_t *)ctx->buf);
        return MT_OK;
    }
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                int8_t *out = output + ((b * ho + y) * wo + x) * o_n;
                for (o = 0; o < o_n; ++o) {
                    const int32_t g = o / opg;
                    const int8_t *wrow = filter + o * kh * kw * cig;
                    int32_t acc = bias[o];
                    int32_t i, j, c;
                    for (i = 0; i < kh; ++i) {
                        const int32_t iy = y * params->stride_h - params->pad_top + i;
                        if (iy < 0 || iy >= hi_) {
                            continue;
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t ix = x * params->stride_w - params->pad_left + j;
                            const int8_t *px;
                            const int8_t *pw;
                            if (ix < 0 || ix >= wi) {
                                continue;
                            }
                            px = input + ((b * hi_ + iy) * wi + ix) * ci + g * cig;
                            pw = wrow + (i * kw + j) * cig;
                            for (c = 0; c < cig; ++c) {
                                acc += ((int32_t)px[c] - zx) * pw[c];
                            }
                        }
                    }
                    acc_min[o] = acc < acc_min[o] ? acc : acc_min[o];
                    acc_max[o] = acc > acc_max[o] ? acc : acc_max[o];
                    out[o] = mt_requantize(acc, quant->multiplier[o], quant->shift[o], params->output_zero_point,
                                           params->act_min, params->act_max);
                }
            }
        }
    }
    return MT_OK;
}
