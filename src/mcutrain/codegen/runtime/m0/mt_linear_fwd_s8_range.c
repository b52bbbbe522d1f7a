/*
 * mcutrain runtime: mt_linear_fwd_s8_range (see mt_fqt_s8.h), the ARMv6-M (Cortex-M0+) twin of
 * train/fqt/mt_linear_fwd_s8_range.c, bit-exact with it: four output rows per pass over the input
 * (mt_m0_dot4_run), their accumulators widening the rows' extremes, then the requantization
 * without a 64-bit multiply (mt_m0_requantize).
 * NOTE: the int32 bound as in the reference (checked by the exporter).
 */
#include "mt_fqt.h"
#include "mt_m0_conv.h"

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
    int8_t *y = output;
    mt_m0_dot d;
    mt_m0_out out;
    int32_t n, o;
    if (!params || !quant || !input || !weight || !bias || !output || !acc_min || !acc_max || batch < 1 ||
        in_features < 1) {
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
            const int32_t count = out_features - o < 4 ? out_features - o : 4;
            d.x_end = input + n * in_features + in_features;
            d.rows = 1;
            mt_m0_dot4_channels(&d, weight + o * in_features, in_features, o, out_features, bias);
            mt_m0_dot4_run(&d);
            mt_m0_widen_ranges(d.acc, count, acc_min + o, acc_max + o);
            mt_m0_requantize_run(d.acc, quant->multiplier + o, quant->shift + o, count, &out, y + o);
        }
        y += out_features;
    }
    return MT_OK;
}
