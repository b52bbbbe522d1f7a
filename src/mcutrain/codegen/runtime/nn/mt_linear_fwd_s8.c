/*
 * mcutrain runtime: mt_linear_fwd_s8, the fully connected layer (see mt_nn.h).
 *
 * Reference kernel: one dot product per output (mt_linear_fwd_s8_ref.h); no scratch.
 * dsp/mt_linear_fwd_s8.c is its DSP twin.
 */
#include "mt_linear_fwd_s8_ref.h"
#include "mt_nn.h"

int32_t mt_linear_fwd_s8_get_buffer_size(int32_t in_features)
{
    (void)in_features;
    return 0;
}

mt_status mt_linear_fwd_s8(const mt_context *ctx,
                           const mt_linear_params *params,
                           const mt_per_channel_quant *quant,
                           int32_t batch,
                           const int8_t *input,
                           int32_t in_features,
                           const int8_t *weight,
                           const int32_t *bias,
                           int32_t out_features,
                           int8_t *output)
{
    (void)ctx;
    if (mt_linear_fwd_s8_check(params, quant, batch, input, in_features, weight, bias, out_features, output) !=
        MT_OK) {
        return MT_ERR_ARG;
    }
    mt_linear_fwd_s8_ref(params, quant, batch, input, in_features, weight, bias, out_features, output);
    return MT_OK;
}
