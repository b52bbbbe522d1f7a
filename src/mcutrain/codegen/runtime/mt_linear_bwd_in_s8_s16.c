/*
 * Linear error propagation of prescaled int16 errors (Python twin: fqt_kernels.linear_bwd_in_acc
 * in mode "int" and fqt.FQT._to_err). NOTE: |acc| <= 32512 * 127 * O < 2^31 for O <= 520 (checked
 * by the exporter).
 */
#include "mt_fixedpoint.h"
#include "mt_fqt.h"
#include "mt_train_dsp.h"

#if MT_DSP
/*
 * Four inputs i..i+3 over every output o (dense, no channel list): per two outputs one word of
 * errors (e[o], e[o+1]), one weight word of each row widened by SXTB16 twice, eight SMLAxy (one
 * MAC each, the halves picked by the instruction). NOTE: 2-byte alignment of e16 suffices for
 * mt_read_s16x2 (unaligned LDR is legal on Armv7E-M; memcpy elsewhere).
 */
static void col4(const int16_t *e, const int8_t *wcol, int32_t out_features, int32_t in_features, int32_t *acc)
{
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int32_t o = 0;
    for (; o + 2 <= out_features; o += 2) {
        const int32_t e2 = mt_read_s16x2(e + o);
        const int32_t w0 = mt_read_s8x4(wcol + o * in_features);
        const int32_t w1 = mt_read_s8x4(wcol + (o + 1) * in_features);
        const int32_t w0_02 = mt_sxtb16(w0), w0_13 = mt_sxtb16_ror8(w0);
        const int32_t w1_02 = mt_sxtb16(w1), w1_13 = mt_sxtb16_ror8(w1);
        a0 = mt_smlabb(w0_02, e2, a0);
        a2 = mt_smlatb(w0_02, e2, a2);
        a1 = mt_smlabb(w0_13, e2, a1);
        a3 = mt_smlatb(w0_13, e2, a3);
        a0 = mt_smlabt(w1_02, e2, a0);
        a2 = mt_smlatt(w1_02, e2, a2);
        a1 = mt_smlabt(w1_13, e2, a1);
        a3 = mt_smlatt(w1_13, e2, a3);
    }
    for (; o < out_features; ++o) {
        const int8_t *w = wcol + o * in_features;
        a0 += (int32_t)e[o] * w[0];
        a1 += (int32_t)e[o] * w[1];
        a2 += (int32_t)e[o] * w[2];
        a3 += (int32_t)e[o] * w[3];
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}
#endif /* MT_DSP */

mt_status mt_linear_bwd_in_s8_s16(int32_t batch,
                                  const int32_t *channels,
                                  int32_t n_channels,
                                  int32_t out_features,
                                  const int16_t *e16,
                                  const int8_t *weight,
                                  int32_t in_features,
                                  int32_t multiplier,
                                  int32_t shift,
                                  int8_t *e_x,
                                  int32_t *acc_min,
                                  int32_t *acc_max)
{
    int32_t b, i, o;
    if (!e16 || !weight || !acc_min || !acc_max || batch < 1) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        const int16_t *e = e16 + b * out_features;
        i = 0;
#if MT_DSP
        for (; !channels && i + 4 <= in_features; i += 4) {
            int32_t acc4[4], j;
            col4(e, weight + i, out_features, in_features, acc4);
            for (j = 0; j < 4; ++j) {
                *acc_min = acc4[j] < *acc_min ? acc4[j] : *acc_min;
                *acc_max = acc4[j] > *acc_max ? acc4[j] : *acc_max;
                if (e_x) {
                    e_x[b * in_features + i + j] = mt_requantize(acc4[j], multiplier, shift, 0, -127, 127);
                }
            }
        }
#endif /* MT_DSP */
        for (; i < in_features; ++i) {
            int32_t acc = 0;
            if (channels) {
                int32_t t;
                for (t = 0; t < n_channels; ++t) {
                    o = channels[t];
                    acc += (int32_t)e[o] * weight[o * in_features + i];
                }
            } else {
                for (o = 0; o < out_features; ++o) {
                    acc += (int32_t)e[o] * weight[o * in_features + i];
                }
            }
            *acc_min = acc < *acc_min ? acc : *acc_min;
            *acc_max = acc > *acc_max ? acc : *acc_max;
            if (e_x) {
                e_x[b * in_features + i] = mt_requantize(acc, multiplier, shift, 0, -127, 127);
            }
        }
    }
    return MT_OK;
}
