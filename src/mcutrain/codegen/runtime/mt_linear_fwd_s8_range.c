/*
 * Linear forward with per-channel accumulator extremes (FQT; Python twin: fqt_kernels.linear_fwd_acc
 * plus the bias add and requantize_output). Plain loops; the int32 bound as in the conv kernel.
 */
#include "mt_fixedpoint.h"
#include "mt_fqt.h"

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
    int32_t b, o, i;
    if (!params || !quant || !input || !weight || !bias || !output || !acc_min || !acc_max || batch < 1) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        const int8_t *x = input + b * in_features;
        for (o = 0; o < out_features; ++o) {
            const int8_t *w = weight + o * in_features;
            int32_t acc = bias[o];
            for (i = 0; i < in_features; ++i) {
                acc += ((int32_t)x[i] - zx) * w[i];
            }
            acc_min[o] = acc < acc_min[o] ? acc : acc_min[o];
            acc_max[o] = acc > acc_max[o] ? acc : acc_max[o];
            output[b * out_features + o] = mt_requantize(acc, quant->multiplier[o], quant->shift[o],
                                                         params->output_zero_point, params->act_min,
                                                         params->act_max);
        }
    }
    return MT_OK;
}
