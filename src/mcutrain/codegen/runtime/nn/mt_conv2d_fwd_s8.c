/*
 * mcutrain runtime: mt_conv2d_fwd_s8, the plain and grouped 2-d convolution (see mt_nn.h).
 *
 * Reference kernel: one accumulator per output element, padding skipped (it holds z_x, so it adds
 * (z_x - z_x) * w = 0) (mt_conv_ref.h); no scratch. dsp/mt_conv2d_fwd_s8.c is its DSP twin.
 */
#include "mt_conv_ref.h"
#include "mt_nn.h"

int32_t mt_conv2d_fwd_s8_get_buffer_size(const mt_dims *filter_dims)
{
    (void)filter_dims;
    return 0;
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
    (void)ctx;
    mt_conv_ref(params, quant, input_dims, input, filter_dims, filter, 0, bias, output_dims, output);
    return MT_OK;
}
