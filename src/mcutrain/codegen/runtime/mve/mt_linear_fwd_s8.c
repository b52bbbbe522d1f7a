/*
 * mcutrain runtime: mt_linear_fwd_s8, the fully connected layer (see mt_nn.h).
 *
 * Helium (MVE) twin of nn/mt_linear_fwd_s8.c, bit-exact with it: the input row is the column of
 * mt_mve.h's GEMV as it is (no copy, no scratch), four output rows share each 16-byte load of it,
 * and the requantization runs four outputs per vector. Without MVE it runs the reference body
 * (mt_linear_fwd_s8_ref.h).
 */
#include "mt_linear_fwd_s8_ref.h"
#include "mt_mve.h"
#include "mt_mve_gemm.h"
#include "mt_nn.h"

int32_t mt_linear_fwd_s8_get_buffer_size(int32_t in_features)
{
#if MT_DSP
    return 2 * in_features; /* the DSP twin's centred int16 row, which the planner mirrors */
#else  /* !MT_DSP */
    (void)in_features;
    return 0;
#endif /* MT_DSP */
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
#if MT_MVE
    {
        mt_mve_block b;
        int32_t o0;
        for (o0 = 0; o0 < out_features; o0 += MT_MVE_BLOCK) {
            const int32_t nb = out_features - o0 < MT_MVE_BLOCK ? out_features - o0 : MT_MVE_BLOCK;
            mt_mve_prepare(&b, weight, in_features, in_features, bias, quant, params->input_zero_point,
                           params->output_zero_point, o0, nb);
            mt_mve_gemm(&b, weight + o0 * in_features, in_features, in_features, input, batch, in_features,
                        quant, o0, nb, params->output_zero_point, params->act_min, params->act_max,
                        output + o0, out_features);
        }
    }
#else  /* !MT_MVE */
    mt_linear_fwd_s8_ref(params, quant, batch, input, in_features, weight, bias, out_features, output);
#endif /* MT_MVE */
    return MT_OK;
}
