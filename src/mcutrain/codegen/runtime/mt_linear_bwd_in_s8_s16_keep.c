/*
 * Linear error propagation over the kept rows of a partial update (Python twin:
 * fqt_kernels.linear_bwd_in_acc in mode "int" with the pruned errors 0, and fqt.FQT._to_err):
 * acc[i] = sum_t e16[t] * w[keep[t], i], the errors compacted by mt_fqt_prescale_s16_keep.
 * NOTE: |acc| <= 32512 * 127 * n_keep < 2^31 as for the dense kernel (n_keep <= O <= 520).
 */
#include "mt_fixedpoint.h"
#include "mt_fqt_keep.h"
#include "mt_train_dsp.h"

#if MT_DSP
/*
 * Four inputs i..i+3 over the kept rows, as the dense kernel's col4: per two kept rows one word of
 * errors, one weight word of each row widened by SXTB16 twice, eight SMLAxy.
 */
static void col4_keep(const int16_t *e, const int32_t *keep, int32_t n_keep, const int8_t *wcol,
                      int32_t in_features, int32_t *acc)
{
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int32_t t = 0;
    for (; t + 2 <= n_keep; t += 2) {
        const int32_t e2 = mt_read_s16x2(e + t);
        const int32_t w0 = mt_read_s8x4(wcol + keep[t] * in_features);
        const int32_t w1 = mt_read_s8x4(wcol + keep[t + 1] * in_features);
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
    if (t < n_keep) {
        const int8_t *w = wcol + keep[t] * in_features;
        a0 += (int32_t)e[t] * w[0];
        a1 += (int32_t)e[t] * w[1];
        a2 += (int32_t)e[t] * w[2];
        a3 += (int32_t)e[t] * w[3];
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}
#endif /* MT_DSP */

mt_status mt_linear_bwd_in_s8_s16_keep(const int32_t *keep,
                                       int32_t n_keep,
                                       const int16_t *e16,
                                       const int8_t *weight,
                                       int32_t in_features,
                                       int32_t multiplier,
                                       int32_t shift,
                                       int8_t *e_x,
                                       int32_t *acc_min,
                                       int32_t *acc_max)
{
    int32_t i = 0, t;
    if (!keep || !e16 || !weight || !acc_min || !acc_max || n_keep < 0) {
        return MT_ERR_ARG;
    }
#if MT_DSP
    for (; i + 4 <= in_features; i += 4) {
        int32_t acc4[4], j;
        col4_keep(e16, keep, n_keep, weight + i, in_features, acc4);
        for (j = 0; j < 4; ++j) {
            *acc_min = acc4[j] < *acc_min ? acc4[j] : *acc_min;
            *acc_max = acc4[j] > *acc_max ? acc4[j] : *acc_max;
            if (e_x) {
                e_x[i + j] = mt_requantize(acc4[j], multiplier, shift, 0, -127, 127);
            }
        }
    }
#endif /* MT_DSP */
    for (; i < in_features; ++i) {
        int32_t acc = 0;
        for (t = 0; t < n_keep; ++t) {
            acc += (int32_t)e16[t] * weight[keep[t] * in_features + i];
        }
        *acc_min = acc < *acc_min ? acc : *acc_min;
        *acc_max = acc > *acc_max ? acc : *acc_max;
        if (e_x) {
            e_x[i] = mt_requantize(acc, multiplier, shift, 0, -127, 127);
        }
    }
    return MT_OK;
}
