/*
 * mcutrain runtime: mt_linear_fwd_s8 (see mt_nn.h), the ARMv6-M (Cortex-M0+) twin of
 * nn/mt_linear_fwd_s8.c, bit-exact with it: four output rows per pass over the input
 * (mt_m0_dot4_run) and the requantization without a 64-bit multiply (mt_m0_requantize).
 */
#include "mt_linear_fwd_s8_ref.h"
#include "mt_m0.h"
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
    int8_t *y = output;
    mt_m0_dot d;
    int32_t n, o, k;
    (void)ctx;
    if (mt_linear_fwd_s8_check(params, quant, batch, input, in_features, weight, bias, out_features, output) !=
        MT_OK) {
        return MT_ERR_ARG;
    }
    d.neg_len = -in_features;
    d.neg_zx = -params->input_zero_point;
    d.wrow = 0;
    d.xrow = 0;
    for (n = 0; n < batch; n++) {
        for (o = 0; o < out_features; o += 4) {
            d.x_end = input + n * in_features + in_features;
            d.rows = 1;
            mt_m0_dot4_channels(&d, weight + o * in_features, in_features, o, out_features, bias);
            mt_m0_dot4_run(&d);
            for (k = 0; k < 4 && o + k < out_features; k++) {
                y[o + k] = mt_m0_requantize(d.acc[k], quant->multiplier[o + k], quant->shift[o + k],
                                            params->output_zero_point, params->act_min, params->act_max);
            }
        }
        y += out_features;
    }
    return MT_OK;
}
