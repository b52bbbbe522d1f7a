/*
 * Linear error propagation: e_x[i] = requantize_single(sum_o e[o] * weight[o, i]) (Python twin:
 * fqt_kernels.linear_bwd_in_acc in mode "int" and fqt.FQT._to_err), on Helium (MVE) cores.
 * mt_linear_bwd_in_s8_s16_keep (partial updates) runs the same loops over the kept rows: its errors
 * come compacted from mt_fqt_prescale_s16_keep (e16[t] is row keep[t]'s); the pruned terms are 0.
 *
 * Twin of train/fqt/mt_linear_bwd_in_s8_s16.c (and of its DSP twin), bit-exact with it: per
 * sample the rows with a nonzero error are listed (exact: the others add nothing; after the ReLU
 * mask about half are zero), then sixteen inputs at a time sum over the list in four int32x4
 * vectors, per row four widening loads (VLDRB.S32) and four VMLA by the row's error; the
 * requantization ("single", FQT's specification in either mode) and the extremes run four inputs
 * per vector. More rows than the list holds, the listed-channel form, or a build without MVE run
 * the reference body (mt_linear_bwd_in_s8_s16_ref.h).
 * NOTE: the int32 bound of the reference (|acc| <= 32512 * 127 * O < 2^31, checked by the
 * exporter) holds for partial sums in any order.
 */
#include "mt_fixedpoint.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_linear_bwd_in_s8_s16_ref.h"
#include "mt_mve.h"

#if MT_MVE
#define MT_MVE_LBI_ROWS 256 /* rows of the nonzero list (stack: 6 bytes each) */

/* acc[0..3] += e_k * weight row k at w + off[k] (16 int8 inputs; `full`: else the first `cnt`). */
MT_INLINE void lbi_block(int full, const int8_t *w, const int32_t *off, const int16_t *ev, int32_t m, int32_t cnt,
                         int32x4_t *acc)
{
    int32x4_t a0 = vdupq_n_s32(0), a1 = a0, a2 = a0, a3 = a0;
    const mve_pred16_t p0 = vctp32q((uint32_t)(cnt > 0 ? cnt : 0));
    const mve_pred16_t p1 = vctp32q((uint32_t)(cnt > 4 ? cnt - 4 : 0));
    const mve_pred16_t p2 = vctp32q((uint32_t)(cnt > 8 ? cnt - 8 : 0));
    const mve_pred16_t p3 = vctp32q((uint32_t)(cnt > 12 ? cnt - 12 : 0));
    int32_t k;
    for (k = 0; k < m; ++k) {
        const int8_t *r = w + off[k];
        const int32_t e = ev[k];
        if (full) {
            a0 = vmlaq_n_s32(a0, vldrbq_s32(r), e);
            a1 = vmlaq_n_s32(a1, vldrbq_s32(r + 4), e);
            a2 = vmlaq_n_s32(a2, vldrbq_s32(r + 8), e);
            a3 = vmlaq_n_s32(a3, vldrbq_s32(r + 12), e);
        } else {
            a0 = vmlaq_n_s32(a0, vldrbq_z_s32(r, p0), e);
            a1 = vmlaq_n_s32(a1, vldrbq_z_s32(r + 4, p1), e);
            a2 = vmlaq_n_s32(a2, vldrbq_z_s32(r + 8, p2), e);
            a3 = vmlaq_n_s32(a3, vldrbq_z_s32(r + 12, p3), e);
        }
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* One sample's inputs, rows keep[t] (keep NULL: t) of errors e[t] for t < n; 0 when n exceeds the list. */
static int linear_bwd_in_mve(const int16_t *e,
                             const int32_t *keep,
                             int32_t n,
                             const int8_t *weight,
                             int32_t in_features,
                             int32_t multiplier,
                             int32_t shift,
                             int8_t *e_x,
                             int32_t *acc_min,
                             int32_t *acc_max)
{
    const int fast = mt_requant_fast_ok_single(multiplier, shift);
    const int32x4_t m4 = vdupq_n_s32(multiplier), nsh = vdupq_n_s32(1 + shift);
    const int32x4_t c1 = vdupq_n_s32(fast ? mt_requant_c1(-1 - shift, 0) : 0);
    int32_t off[MT_MVE_LBI_ROWS];
    int16_t ev[MT_MVE_LBI_ROWS];
    int32_t m = 0, t, i0, j;
    int32_t lo = *acc_min, hi = *acc_max;
    if (n > MT_MVE_LBI_ROWS) {
        return 0;
    }
    for (t = 0; t < n; ++t) {
        if (e[t] != 0) {
            off[m] = (keep ? keep[t] : t) * in_features;
            ev[m++] = e[t];
        }
    }
    for (i0 = 0; i0 < in_features; i0 += 16) {
        const int32_t cnt = in_features - i0 < 16 ? in_features - i0 : 16;
        int32x4_t acc[4];
        if (cnt == 16) {
            lbi_block(1, weight + i0, off, ev, m, cnt, acc);
        } else {
            lbi_block(0, weight + i0, off, ev, m, cnt, acc);
        }
        for (j = 0; j * 4 < cnt; ++j) {
            const int32_t left = cnt - 4 * j;
            const mve_pred16_t p = vctp32q((uint32_t)left);
            lo = vminvq_p_s32(lo, acc[j], p);
            hi = vmaxvq_p_s32(hi, acc[j], p);
            if (e_x && fast) { /* clamp [-127, 127]: the prepared form's [-128, 127], then the error's */
                const int32x4_t r = vminq_s32(vmaxq_s32(mt_mve_requantize_single(acc[j], m4, nsh, c1, 0),
                                                        vdupq_n_s32(-127)), vdupq_n_s32(127));
                vstrbq_p_s32(e_x + i0 + 4 * j, r, p);
            } else if (e_x) {
                int32_t v[4], q;
                vstrwq_s32(v, acc[j]);
                for (q = 0; q < 4 && q < left; ++q) {
                    e_x[i0 + 4 * j + q] = mt_requantize_single(v[q], multiplier, shift, 0, -127, 127);
                }
            }
        }
    }
    *acc_min = lo;
    *acc_max = hi;
    return 1;
}
#endif /* MT_MVE */

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
    int32_t b;
    if (!e16 || !weight || !acc_min || !acc_max || batch < 1) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        const int16_t *e = e16 + b * out_features;
        int8_t *ex = e_x ? e_x + b * in_features : NULL;
        if (channels) {
            mt_linear_bwd_in_s8_s16_ref(channels, channels, n_channels, e, weight, 0, in_features, multiplier, shift,
                                        ex, acc_min, acc_max);
            continue;
        }
#if MT_MVE
        if (linear_bwd_in_mve(e, NULL, out_features, weight, in_features, multiplier, shift, ex, acc_min, acc_max)) {
            continue;
        }
#endif /* MT_MVE */
        mt_linear_bwd_in_s8_s16_ref(NULL, NULL, out_features, e, weight, 0, in_features, multiplier, shift, ex, acc_min,
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
    if (!keep || !e16 || !weight || !acc_min || !acc_max || n_keep < 0) {
        return MT_ERR_ARG;
    }
#if MT_MVE
    if (linear_bwd_in_mve(e16, keep, n_keep, weight, in_features, multiplier, shift, e_x, acc_min, acc_max)) {
        return MT_OK;
    }
#endif /* MT_MVE */
    mt_linear_bwd_in_s8_s16_ref(keep, NULL, n_keep, e16, weight, 0, in_features, multiplier, shift, e_x, acc_min,
                                acc_max);
    return MT_OK;
}
