/*
 * Depthwise conv forward with per-channel accumulator extremes (FQT; see
 * train/fqt/mt_depthwise_conv2d_fwd_s8_range.c for the Python twin). DSP twin of that file,
 * bit-exact with it: the row body of nn/mt_depthwise_rows_dsp.h where mt_dwr_fits takes the layer,
 * else the quad loop of nn/mt_depthwise_dsp.h; both keep the four channels' extremes in locals and
 * merge them once per quad. Layers it does not take (see mt_dw_mode) and
 * cores without DSP run the reference body (mt_depthwise_conv2d_fwd_s8_range_ref.h).
 */
#include "mt_depthwise_conv2d_fwd_s8_range_ref.h"
#include "mt_depthwise_dsp.h"
#include "mt_depthwise_rows_dsp.h"

#if MT_DSP
/* The quad loop out of line: one call's stack holds one set of unpacked weights. */
static MT_NOINLINE void dw_range_quad(const mt_conv_params *p, const mt_per_channel_quant *q, const mt_dims *in_d,
                                      const int8_t *x, const mt_dims *f_d, const int8_t *w, const int32_t *b,
                                      const mt_dims *out_d, int8_t *y, int32_t *lo, int32_t *hi, int32_t c0, int mode)
{
    mt_dw_quad(p, q, in_d, x, f_d, w, b, out_d, y, lo, hi, c0, mode, 1);
}

/* The row body (mt_depthwise_rows_dsp.h) out of line: one call's stack holds one set of its rows. */
static MT_NOINLINE void dw_range_rows_quad(const mt_conv_params *p, const mt_per_channel_quant *q,
                                           const mt_dims *in_d, const int8_t *x, const mt_dims *f_d, const int8_t *w,
                                           const int32_t *b, const mt_dims *out_d, int8_t *y, int32_t *lo,
                                           int32_t *hi, int32_t c0, int mode)
{
    mt_dwr_quad(p, q, in_d, x, f_d, w, b, out_d, y, lo, hi, c0, mode, 1);
}
#endif /* MT_DSP */

mt_status mt_depthwise_conv2d_fwd_s8_range(const mt_context *ctx,
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
#if MT_DSP
    if (params && quant && input_dims && input && filter_dims && filter && bias && output_dims && output && acc_min &&
        acc_max && filter_dims->c == 1 && filter_dims->n == input_dims->c && params->groups == input_dims->c &&
        output_dims->c == input_dims->c) {
        const int mode = mt_dw_mode(params, quant, input_dims, filter_dims);
        if (mode >= 0) {
            const int rows = mt_dwr_fits(params, input_dims, filter_dims, output_dims, mode, 5);
            int32_t c;
            for (c = 0; c + 4 <= input_dims->c; c += 4) {
                if (rows) {
                    dw_range_rows_quad(params, quant, input_dims, input, filter_dims, filter, bias, output_dims,
                                       output, acc_min, acc_max, c, mode);
                } else {
                    dw_range_quad(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output,
                                  acc_min, acc_max, c, mode);
                }
            }
            for (; c < input_dims->c; ++c) {
                mt_dw_single(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output,
                             acc_min, acc_max, c);
            }
            return MT_OK;
        }
    }
#endif /* MT_DSP */
    return mt_depthwise_conv2d_fwd_s8_range_ref(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                                                output_dims, output, acc_min, acc_max);
}
