/* uint8 linear forward of seed A, as mt_conv2d_fwd_u8_range (Python twin: fqt_kernels.linear_fwd_acc). */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

mt_status mt_linear_fwd_u8_range(const mt_linear_params *params,
                                 int32_t w_zero_point,
                                 float multiplier,
                                 int32_t batch,
                                 const uint8_t *input,
                                 int32_t in_features,
                                 const uint8_t *weight,
                                 const int32_t *bias,
                                 int32_t out_features,
                                 uint8_t *output,
                                 int32_t *acc_min,
                                 int32_t *acc_max)
{
    int32_t b, o, i;
    if (!params || !input || !weight || !bias || !output || !acc_min || !acc_max || batch < 1) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        const uint8_t *x = input + b * in_features;
        for (o = 0; o < out_features; ++o) {
            const uint8_t *w = weight + o * in_features;
            int32_t acc = bias[o];
            for (i = 0; i < in_features; ++i) {
                acc += ((int32_t)x[i] - params->input_zero_point) * ((int32_t)w[i] - w_zero_point);
            }
            *acc_min = acc < *acc_min ? acc : *acc_min;
            *acc_max = acc > *acc_max ? acc : *acc_max;
            output[b * out_features + o] = (uint8_t)mt_requant_f32_floor(
                acc, multiplier, params->output_zero_point, params->act_min, params->act_max);
        }
    }
    return MT_OK;
}
