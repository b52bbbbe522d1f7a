/*
 * mcutrain runtime: mt_conv2d_fwd_s8_range (see mt_fqt_s8.h), the ARMv6-M (Cortex-M0+) twin of
 * train/fqt/mt_conv2d_fwd_s8_range.c, bit-exact with it: the inference twin's dense loop
 * (mt_m0_conv_dense: four output channels per input byte, the requantization without a 64-bit
 * multiply) with each group of four accumulators also widening the channels' extremes. Grouped
 * convs take the reference body (mt_conv2d_fwd_s8_range_ref.h).
 * NOTE: |acc| <= |b| + 255 * sum|w| < 2^31 as in the reference (the exporter bounds the bias).
 */
#include "mt_conv2d_fwd_s8_range_ref.h"
#include "mt_fqt.h"
#include "mt_m0_conv.h"

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
    (void)ctx;
    if (!params || !quant || !input || !filter || !bias || !output || !acc_min || !acc_max || params->groups < 1 ||
        filter_dims->c * params->groups != input_dims->c || output_dims->c != filter_dims->n) {
        return MT_ERR_ARG;
    }
    if (params->groups != 1) {
        mt_conv2d_fwd_s8_range_ref(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output,
                                   acc_min, acc_max);
    } else {
        mt_m0_conv_dense(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output, acc_min,
                         acc_max);
    }
    return MT_OK;
}
