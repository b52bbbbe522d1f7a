/*
 * Linear forward with per-channel accumulator extremes (FQT; Python twin: fqt_kernels.linear_fwd_acc
 * plus the bias add and requantize_output). DSP twin of train/fqt/mt_linear_fwd_s8_range.c,
 * bit-exact with it: pairs of rows share one pass over the input (dot_2rows); the reference body
 * (mt_linear_fwd_s8_range_ref.h) does the odd last row and every row on a core without DSP.
 */
#include "mt_fixedpoint.h"
#include "mt_fqt.h"
#include "mt_linear_fwd_s8_range_ref.h"
#include "mt_train_dsp.h"

#if MT_DSP
/*
 * Two rows against one input row, no scratch: per four inputs one LDR and SXTAB16 twice give the
 * centred pairs (x0 - z, x2 - z), (x1 - z, x3 - z) in SMLAD order; each row adds one weight word,
 * SXTB16 twice and two SMLAD (13 instructions per 8 MACs). NOTE: |x - z| <= 255 fits a half.
 */
static void dot_2rows(const int8_t *x, int32_t n, int32_t nz, const int8_t *wa, const int8_t *wb, int32_t *acc_a,
                      int32_t *acc_b)
{
    int32_t a = *acc_a, b = *acc_b, i = 0;
    for (; i + 4 <= n; i += 4) {
        const int32_t x4 = mt_read_s8x4(x + i);
        const int32_t x02 = mt_sxtab16(nz, x4), x13 = mt_sxtab16_ror8(nz, x4);
        const int32_t wa4 = mt_read_s8x4(wa + i), wb4 = mt_read_s8x4(wb + i);
        a = mt_smlad(mt_sxtb16(wa4), x02, a);
        a = mt_smlad(mt_sxtb16_ror8(wa4), x13, a);
        b = mt_smlad(mt_sxtb16(wb4), x02, b);
        b = mt_smlad(mt_sxtb16_ror8(wb4), x13, b);
    }
    *acc_a = a;
    *acc_b = b;
}
#endif /* MT_DSP */

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
        const int8_t *x = input + b * in_features;
        o = 0;
#if MT_DSP
        {
            const int32_t nz = (int32_t)(((uint32_t)(-zx) & 0xFFFFu) * 0x10001u); /* (-z, -z) */
            const int32_t n4 = in_features & ~3;
            for (; o + 2 <= out_features; o += 2) {
                const int8_t *wa = weight + o * in_features;
                const int8_t *wb = wa + in_features;
                int32_t acc[2];
                int32_t r, i;
                acc[0] = bias[o];
                acc[1] = bias[o + 1];
                dot_2rows(x, n4, nz, wa, wb, &acc[0], &acc[1]);
                for (i = n4; i < in_features; ++i) {
                    acc[0] += ((int32_t)x[i] - zx) * wa[i];
                    acc[1] += ((int32_t)x[i] - zx) * wb[i];
                }
                for (r = 0; r < 2; ++r) {
                    acc_min[o + r] = acc[r] < acc_min[o + r] ? acc[r] : acc_min[o + r];
                    acc_max[o + r] = acc[r] > acc_max[o + r] ? acc[r] : acc_max[o + r];
                    output[b * out_features + o + r] = mt_requantize(acc[r], quant->multiplier[o + r],
                                                                     quant->shift[o + r], params->output_zero_point,
                                                                     params->act_min, params->act_max);
                }
            }
        }
#endif /* MT_DSP */
        for (; o < out_features; ++o) {
            mt_linear_fwd_s8_range_ref(params, quant, zx, x, in_features, weight, bias, o, out_features, b, output,
                                       acc_min, acc_max);
        }
    }
    return MT_OK;
}
