/*
 * Depthwise conv forward with per-channel accumulator extremes (FQT; Python twin:
 * fqt_kernels.conv2d_fwd_acc with groups = C, the bias add and requantize_output, with
 * fqt._acc_range reading the extremes). Same arithmetic as the grouped loops of
 * mt_conv2d_fwd_s8_range, reordered for depthwise layers: per output position a block of
 * channels is accumulated tap by tap with the channels as the inner loop (contiguous inputs), so
 * no per-channel division or one-iteration loop remains.
 * NOTE: |acc| <= |b| + 255 * sum|w| < 2^31 (the bias room of fqt._bias_room), in any order.
 * Reference kernel (mt_depthwise_conv2d_fwd_s8_range_ref.h); dsp/mt_depthwise_conv2d_fwd_s8_range.c
 * is its DSP twin.
 */
#include "mt_depthwise_conv2d_fwd_s8_range_ref.h"

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
    return mt_depthwise_conv2d_fwd_s8_range_ref(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                                                output_dims, output, acc_min, acc_max);
}
