/*
 * mcutrain runtime: mt_conv2d_fwd_s8_s16, the 2-d convolution with weights stored widened to int16
 * (see mt_nn.h for the layout).
 *
 * Why a second conv kernel: with int8 weights every four weights cost three instructions in the
 * inner loop (LDR + 2 SXTB16). Frozen weights in Flash can be widened once, at export time, into
 * the order SMLAD wants, so the loads bring the pairs SMLAD multiplies. Each kernel row
 * (kw * Cg values) is padded with zero weights to a multiple of four, so the im2col copies whole
 * words of input per kernel row (the extra input bytes meet zero weights and add exactly 0),
 * and the rows of each pair of output channels are interleaved pair by pair (mt_conv_s16.h) so
 * one LDRD brings a pair of k for both.
 *
 * Reference kernel: one accumulator per output element, as mt_conv2d_fwd_s8 (mt_conv_ref.h);
 * no scratch. dsp/mt_conv2d_fwd_s8_s16.c is its DSP twin.
 */
#include "mt_conv_ref.h"
#include "mt_nn.h"

int32_t mt_conv2d_fwd_s8_s16_get_buffer_size(const mt_conv_params *params,
                                             const mt_dims *input_dims,
                                             const mt_dims *filter_dims,
                                             const mt_dims *output_dims)
{
    (void)params;
    (void)input_dims;
    (void)filter_dims;
    (void)output_dims;
    return 0;
}

mt_status mt_conv2d_fwd_s8_s16(const mt_context *ctx,
                               const mt_conv_params *params,
                               const mt_per_channel_quant *quant,
                               const mt_dims *input_dims,
                               const int8_t *input,
                               const mt_dims *filter_dims,
                               const int16_t *filter,
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
    mt_conv_ref(params, quant, input_dims, input, filter_dims, filter, 1, bias, output_dims, output);
    return MT_OK;
}
