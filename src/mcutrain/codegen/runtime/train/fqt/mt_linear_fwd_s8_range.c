/*
 * Linear forward with per-channel accumulator extremes (FQT; Python twin: fqt_kernels.linear_fwd_acc
 * plus the bias add and requantize_output). Reference kernel: plain loops
 * (mt_linear_fwd_s8_range_ref.h); dsp/mt_linear_fwd_s8_range.c is its DSP twin (two rows a pass).
 */
#include "mt_fqt.h"
#include "mt_linear_fwd_s8_range_ref.h"

mt_status mt_linear_fwd_s8_range(const mt_linear_params *params,
                                 const mt_per_channel_quant *quant,
                                 int32_t batch,
                                 const int8_t *input,
                                 int32_t in_features,
                                 const int8_t *weight,
                                 const int32_t *bias,
                                 int32_t out_features,
                                 int8_t *output,
                                 int32_t *acc_min,
                                 int32_t *acc_max)
{
    const int32_t zx = params ? params->input_zero_point : 0;
    int32_t b, o;
    if (!params || !quant || !input || !weight || !bias || !output || !acc_min || !acc_max || batch < 1) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        for (o = 0; o < out_features; ++o) {
            mt_linear_fwd_s8_range_ref(params, quant, zx, input + b * in_features, in_features, weight, bias, o,
                                       out_features, b, output, acc_min, acc_max);
        }
    }
    return MT_OK;
}
