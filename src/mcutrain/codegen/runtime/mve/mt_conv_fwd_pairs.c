/*
 * mcutrain runtime: the FQT conv forward of Helium (MVE) cores, in place of the DSP column pairs
 * of train/fqt/mt_conv_fwd_pairs.c (mt_conv_fwd_pairs.h), exact integer sums like it.
 *
 * Any dense conv (groups 1, any C, O and requantization) with a scratch of at least K bytes:
 * mt_mve_conv.h's int8 im2col columns of up to 16 output pixels, four output channels sharing
 * each 16-byte load of a column (VMLADAVA.S8), the requantization four channels per vector in the
 * library's mode, and the channels' accumulator extremes kept in two vectors per four channels
 * and widened once per block of pixels (the plain min/max of mt_conv2d_fwd_s8_range, which starts
 * from INT32_MAX / INT32_MIN). A grouped conv, a scratch too small, or a build without MVE returns
 * 0 and mt_conv2d_fwd_s8_range takes its general path.
 */
#include "mt_conv_fwd_pairs.h"
#include "mt_mve.h"
#include "mt_mve_conv.h"

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
#if MT_MVE
    const int32_t k = filter_dims->h * filter_dims->w * filter_dims->c;
    int32_t fit;
    if (!ctx || !ctx->buf || k < 1 || ctx->size < k || params->groups != 1 || filter_dims->c != input_dims->c) {
        return 0;
    }
    fit = ctx->size / k;
    mt_mve_conv(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output, (int8_t *)ctx->buf,
                fit < MT_MVE_COLS ? fit : MT_MVE_COLS, acc_min, acc_max);
    return 1;
#else  /* !MT_MVE */
    (void)ctx, (void)params, (void)quant, (void)input_dims, (void)input, (void)filter_dims, (void)filter;
    (void)bias, (void)output_dims, (void)output, (void)acc_min, (void)acc_max;
    return 0;
#endif /* MT_MVE */
}
