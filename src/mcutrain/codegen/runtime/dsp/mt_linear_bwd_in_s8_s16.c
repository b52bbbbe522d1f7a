/*
 * Linear error propagation of prescaled int16 errors (Python twin: fqt_kernels.linear_bwd_in_acc
 * in mode "int" and fqt.FQT._to_err). NOTE: |acc| <= 32512 * 127 * O < 2^31 for O <= 520 (checked
 * by the exporter).
 * mt_linear_bwd_in_s8_s16_keep (partial updates) runs the same loops over the kept rows: its errors
 * come compacted from mt_fqt_prescale_s16_keep (e16[t] is row keep[t]'s); the pruned terms are 0.
 * DSP twin of train/fqt/mt_linear_bwd_in_s8_s16.c, bit-exact with it: four inputs per pass over the
 * nonzero errors (bwd_in_list); the reference body (mt_linear_bwd_in_s8_s16_ref.h) does the rest.
 */
#include "mt_fixedpoint.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_linear_bwd_in_s8_s16_ref.h"
#include "mt_train_dsp.h"

#if MT_DSP
#define LBI_OMAX 256 /* outputs of the nonzero list (stack: 12 bytes each) */

/*
 * Four inputs i..i+3 over the listed pairs of outputs with a nonzero error: per pair one word of
 * errors (e[oa], e[ob]) and the two rows' offsets, one weight word of each row widened by SXTB16
 * twice, eight SMLAxy (one MAC each, the halves picked by the instruction). Outputs whose error
 * is zero are not listed (exact: they add nothing; after the ReLU mask about half are zero).
 */
static void col4(const int32_t *ew, const int32_t *off, int32_t np, const int8_t *wcol, int32_t *acc)
{
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int32_t k;
    for (k = 0; k < np; ++k) {
        const int32_t e2 = ew[k];
        const int32_t w0 = mt_read_s8x4(wcol + off[2 * k]);
        const int32_t w1 = mt_read_s8x4(wcol + off[2 * k + 1]);
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
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* Error of an accumulator: mt_requantize_fast_single where the shift allows (clamp to [-127, 127]
   after); errors round "single" in every mode (FQT's specification). */
MT_INLINE int8_t lbi_requant(int32_t acc, int32_t multiplier, int32_t shift, int32_t fast, int32_t sh, int32_t c1)
{
    int32_t y;
    if (!fast) {
        return mt_requantize_single(acc, multiplier, shift, 0, -127, 127);
    }
    y = mt_requantize_fast_single(acc, multiplier, sh, c1);
    return (int8_t)(y < -127 ? -127 : y);
}

/*
 * The DSP path of one sample over inputs [0, in_features & ~3), errors e[t] of rows keep[t] for t < n
 * (keep NULL: row t); returns that count (0 when n exceeds the list).
 */
static int32_t bwd_in_list(const int16_t *e, const int32_t *keep, int32_t n_rows, const int8_t *weight,
                           int32_t in_features, int32_t multiplier, int32_t shift, int8_t *e_x, int32_t *acc_min,
                           int32_t *acc_max)
{
    int32_t ew[LBI_OMAX / 2 + 1];
    int32_t off[LBI_OMAX + 2];
    const int32_t fast = mt_requant_fast_ok_single(multiplier, shift);
    const int32_t sh = -1 - shift;
    const int32_t c1 = fast ? mt_requant_c1(sh, 0) : 0;
    int32_t n = 0, o, i, lo = *acc_min, hi = *acc_max;
    if (n_rows > LBI_OMAX) {
        return 0;
    }
    for (o = 0; o < n_rows; ++o) {
        if (e[o] != 0) {
            off[n] = (keep ? keep[o] : o) * in_features;
            if (n & 1) {
                ew[n >> 1] = (int32_t)(((uint32_t)ew[n >> 1] & 0xFFFFu) | ((uint32_t)e[o] << 16));
            } else {
                ew[n >> 1] = (int32_t)((uint32_t)e[o] & 0xFFFFu); /* an odd last one pairs with a zero */
            }
            ++n;
        }
    }
    if (n & 1) {
        off[n] = off[n - 1];
    }
    for (i = 0; i + 4 <= in_features; i += 4) {
        int32_t acc4[4], j;
        col4(ew, off, (n + 1) >> 1, weight + i, acc4);
        for (j = 0; j < 4; ++j) {
            lo = acc4[j] < lo ? acc4[j] : lo;
            hi = acc4[j] > hi ? acc4[j] : hi;
            if (e_x) {
                e_x[i + j] = lbi_requant(acc4[j], multiplier, shift, fast, sh, c1);
            }
        }
    }
    *acc_min = lo;
    *acc_max = hi;
    return i;
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
    int32_t b, i;
    if (!e16 || !weight || !acc_min || !acc_max || batch < 1) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        const int16_t *e = e16 + b * out_features;
        int8_t *ex = e_x ? e_x + b * in_features : NULL;
        i = 0;
        if (channels) {
            mt_linear_bwd_in_s8_s16_ref(channels, channels, n_channels, e, weight, 0, in_features, multiplier, shift,
                                        ex, acc_min, acc_max);
            continue;
        }
#if MT_DSP
        i = bwd_in_list(e, NULL, out_features, weight, in_features, multiplier, shift, ex, acc_min, acc_max);
#endif /* MT_DSP */
        mt_linear_bwd_in_s8_s16_ref(NULL, NULL, out_features, e, weight, i, in_features, multiplier, shift, ex, acc_min,
                                    acc_max);
    }
    return MT_OK;
}

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
    int32_t i = 0;
    if (!keep || !e16 || !weight || !acc_min || !acc_max || n_keep < 0) {
        return MT_ERR_ARG;
    }
#if MT_DSP
    i = bwd_in_list(e16, keep, n_keep, weight, in_features, multiplier, shift, e_x, acc_min, acc_max);
#endif /* MT_DSP */
    mt_linear_bwd_in_s8_s16_ref(keep, NULL, n_keep, e16, weight, i, in_features, multiplier, shift, e_x, acc_min,
                                acc_max);
    return MT_OK;
}
