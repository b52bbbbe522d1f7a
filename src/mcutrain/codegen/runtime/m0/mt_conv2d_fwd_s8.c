/*
 * mcutrain runtime: mt_conv2d_fwd_s8 (see mt_nn.h), the ARMv6-M (Cortex-M0+) twin of
 * nn/mt_conv2d_fwd_s8.c, bit-exact with it.
 *
 * The dense (groups == 1) conv is mt_m0_conv_dense (mt_m0_conv.h, shared with the FQT conv with
 * ranges); grouped convs take the reference body (mt_conv_ref.h).
 */
#include "mt_conv_ref.h"
#include "mt_m0_conv.h"
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
    if (params->groups != 1) {
        mt_conv_ref(params, quant, input_dims, input, filter_dims, filter, 0, bias, output_dims, output);
    } else {
        mt_m0_conv_dense(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output, NULL,
                         NULL);
    }
    return MT_OK;
}
