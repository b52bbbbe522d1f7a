/*
 * mcutrain runtime: mt_linear_fwd_s8_rows4, the fully connected layer with its frozen weights
 * stored four rows interleaved (see mt_nn.h for the layout).
 *
 * Why: a matrix-vector product uses every weight once, so its loads cannot be amortized; what
 * can shrink is their count. With rows 4b .. 4b + 3 interleaved word by word, one LDM brings
 * sixteen weights (four of each row) and one LDRD the four matching centred inputs: per four
 * k, LDRD + LDM + 8 SXTB16 + 8 SMLAD = 18 instructions for 16 MACs (1.125 per MAC), where
 * separate rows need an LDR per row (21 per 16, mt_mat_mult_s8_s16_1col). The layout is only a
 * permutation of the int8 weights (rows padded with zeros to a multiple of four), so Flash does
 * not grow; only inference exports for DSP builds use it (training keeps the plain layout of
 * mt_linear_fwd_s8 for its RAM weights).
 *
 * Reference kernel: one dot product per output, reading the interleaved layout
 * (mt_linear_fwd_s8_rows4_ref.h); no scratch. dsp/mt_linear_fwd_s8_rows4.c is its DSP twin.
 */
#include "mt_linear_fwd_s8_ref.h"
#include "mt_linear_fwd_s8_rows4_ref.h"
#include "mt_nn.h"

int32_t mt_linear_fwd_s8_rows4_get_buffer_size(int32_t in_features)
{
    (void)in_features;
    return 0;
}

mt_status mt_linear_fwd_s8_rows4(const mt_context *ctx,
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
    mt_linear_fwd_s8_rows4_ref(params, quant, batch, input, in_features, weight, bias, out_features, output);
    return MT_OK;
}
