/*
 * mcutrain runtime: mt_depthwise_conv2d_fwd_s8 (see mt_nn.h).
 *
 * Output channel o reads input channel o / m (m = O / C, the channel multiplier). The taps are
 * summed in (ky, kx) order like the Python twin; with no overflow possible (bound checked at
 * export) the order does not matter anyway. One plain loop serves every core: depthwise layers
 * do few MACs per weight, so memory traffic, not arithmetic, bounds them.
 * Reference kernel (mt_depthwise_conv2d_fwd_s8_ref.h); dsp/mt_depthwise_conv2d_fwd_s8.c is its DSP twin.
 */
#include "mt_depthwise_conv2d_fwd_s8_ref.h"

mt_status mt_depthwise_conv2d_fwd_s8(const mt_conv_params *params,
                                     const mt_per_channel_quant *quant,
                                     const mt_dims *input_dims,
                                     const int8_t *input,
                                     const mt_dims *filter_dims,
                                     const int8_t *filter,
                                     const int32_t *bias,
                                     const mt_dims *output_dims,
                                     int8_t *output)
{
    const mt_status st = mt_depthwise_conv2d_fwd_s8_check(params, quant, input_dims, input, filter_dims, filter,
                                                          bias, output_dims, output);
    if (st != MT_OK) {
        return st;
    }
    mt_depthwise_conv2d_fwd_s8_ref(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output);
    return MT_OK;
}
