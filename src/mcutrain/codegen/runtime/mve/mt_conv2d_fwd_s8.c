/*
 * mcutrain runtime: mt_conv2d_fwd_s8, the plain and grouped 2-d convolution (see mt_nn.h).
 *
 * Helium (MVE) twin of nn/mt_conv2d_fwd_s8.c, bit-exact with it: per output pixel, the im2col
 * column of int8 inputs (z_x in the padding, so padded taps add w * 0 after the fold of
 * mt_mve.h), then four output channels at a time share each 16-byte load of the column
 * (VMLADAVA.S8: 16 products per instruction), and the requantization runs four channels per
 * vector (mt_mve.h). It uses the first K bytes of the DSP twin's scratch (the size it reports is
 * the DSP twin's, which the planner mirrors). Grouped convs, a scratch too small, or a build
 * without MVE run the reference body (mt_conv_ref.h).
 */
#include <string.h>

#include "mt_conv_ref.h"
#include "mt_mve.h"
#include "mt_mve_conv.h"
#include "mt_nn.h"

/* NOTE: the DSP twin's block bound; the same scratch formula keeps the planner's mirror true. */
#define MT_CONV_WIDE_K_MAX 256

int32_t mt_conv2d_fwd_s8_get_buffer_size(const mt_dims *filter_dims)
{
#if MT_DSP
    const int32_t k = filter_dims->h * filter_dims->w * filter_dims->c;
    return 2 * (k <= MT_CONV_WIDE_K_MAX ? 7 : 2) * k + ((filter_dims->c & 3) != 0 ? 2 * k : 0);
#else  /* !MT_DSP */
    (void)filter_dims;
    return 0;
#endif /* MT_DSP */
}

mt_status mt_conv2d_fwd_s8(const mt_context *ctx,
                           const mt_conv_params *params,
                           const mt_per_channel_quant *quant,
                           const mt_dims *input_dims,
                           const int8_t *input,
                           const mt_dims *filter_dims,
                           const int8_t *filter,
                           const int32_t *bias,
                           const mt_dims *output_dims,
                           int8_t *output)
{
    const mt_status st =
        mt_conv_check_args(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output);
    if (st != MT_OK) {
        return st;
    }
#if MT_MVE
    if (params->groups == 1 && ctx && ctx->buf &&
        ctx->size >= filter_dims->h * filter_dims->w * filter_dims->c) {
        const int32_t k = filter_dims->h * filter_dims->w * filter_dims->c;
        const int32_t fit = ctx->size / k;
        mt_mve_conv(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output,
                    (int8_t *)ctx->buf, fit < MT_MVE_COLS ? fit : MT_MVE_COLS, 0, 0);
        return MT_OK;
    }
#else  /* !MT_MVE */
    (void)ctx;
#endif /* MT_MVE */
    mt_conv_ref(params, quant, input_dims, input, filter_dims, filter, 0, bias, output_dims, output);
    return MT_OK;
}
