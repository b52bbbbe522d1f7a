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
    mt_m0_out out;
    int32_t n, o;
    (void)ctx;
    if (mt_linear_fwd_s8_check(params, quant, batch, input, in_features, weight, bias, out_features, output) !=
        MT_OK) {
        return MT_ERR_ARG;
    }
    out.zero_point = params->output_zero_point;
    out.act_min = params->act_min;
    out.act_max = params->act_max;
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
            mt_m0_requantize_run(d.acc, quant->multiplier + o, quant->shift + o,
                                 out_features - o < 4 ? out_features - o : 4, &out, y + o);
        }
        y += out_features;
    }
    return MT_OK;
}
