/*
 * The bodies of mt_linear_bwd_w_s8_s8 and mt_linear_bwd_w_s8_s8_keep, always inline, shared by the
 * reference (train/fqt/mt_linear_bwd_w_s8_s8.c) and its DSP twin (dsp/mt_linear_bwd_w_s8_s8.c):
 * each sample's rows go to `fast` first (the twin's DSP path; NULL in the reference), and to the
 * reference loop where it declines them, so both builds share one definition of the checks, the
 * kept rows' zeroing and the result.
 */
#ifndef MT_LINEAR_BWD_W_S8_S8_REF_H
#define MT_LINEAR_BWD_W_S8_S8_REF_H

#include <stddef.h>

#include "mt_arch.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"

/* A fast path over one sample's rows keep[0..n) (keep NULL: 0..n), errors e[row]: non-zero when it
   did them, 0 to leave them to the reference loop. */
typedef int (*mt_lbw_fast_fn)(int32_t zx, const int8_t *x, int32_t in_features, const int8_t *e, const int32_t *keep,
                              int32_t n, int32_t *grad, int32_t *grad_bias);

/* The reference loop of one sample over rows keep[0..n) (keep NULL: 0..n), errors e[row]. */
MT_INLINE void mt_linear_bwd_w_s8_s8_rows_ref(int32_t zx, const int8_t *x, int32_t in_features, const int8_t *e,
                                              const int32_t *keep, int32_t n, int32_t *grad, int32_t *grad_bias)
{
    int32_t t, i;
    for (t = 0; t < n; ++t) {
        const int32_t o = keep ? keep[t] : t;
        const int32_t eo = e[o];
        int32_t *g = grad + o * in_features;
        if (eo == 0) {
            continue; /* exact: a zero error adds nothing */
        }
        grad_bias[o] += eo;
        for (i = 0; i < in_features; ++i) {
            g[i] += eo * ((int32_t)x[i] - zx);
        }
    }
}

/* mt_linear_bwd_w_s8_s8 (mt_fqt.h), with `fast` tried first on each sample (NULL: none). */
MT_INLINE mt_status mt_linear_bwd_w_s8_s8_with(int32_t input_zero_point,
                                               int32_t batch,
                                               const int8_t *input,
                                               int32_t in_features,
                                               const int8_t *e,
                                               int32_t out_features,
                                               int32_t *grad,
                                               int32_t *grad_bias,
                                               mt_lbw_fast_fn fast)
{
    int32_t b;
    if (!input || !e || !grad || !grad_bias || batch < 1) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        const int8_t *x = input + b * in_features;
        if (fast &&
            fast(input_zero_point, x, in_features, e + b * out_features, NULL, out_features, grad, grad_bias)) {
            continue;
        }
        mt_linear_bwd_w_s8_s8_rows_ref(input_zero_point, x, in_features, e + b * out_features, NULL, out_features,
                                       grad, grad_bias);
    }
    return MT_OK;
}

/* mt_linear_bwd_w_s8_s8_keep (mt_fqt_keep.h), with `fast` tried first (NULL: none). */
MT_INLINE mt_status mt_linear_bwd_w_s8_s8_keep_with(int32_t input_zero_point,
                                                    const int32_t *keep,
                                                    int32_t n_keep,
                                                    const int8_t *input,
                                                    int32_t in_features,
                                                    const int8_t *e,
                                                    int32_t *grad,
                                                    int32_t *grad_bias,
                                                    mt_lbw_fast_fn fast)
{
    int32_t t, i;
    if (!keep || !input || !e || !grad || !grad_bias || n_keep < 0 || in_features < 1) {
        return MT_ERR_ARG;
    }
    for (t = 0; t < n_keep; ++t) { /* overwrite: the kept rows start from 0 */
        int32_t *g = grad + keep[t] * in_features;
        for (i = 0; i < in_features; ++i) {
            g[i] = 0;
        }
        grad_bias[keep[t]] = 0;
    }
    if (fast && fast(input_zero_point, input, in_features, e, keep, n_keep, grad, grad_bias)) {
        return MT_OK;
    }
    mt_linear_bwd_w_s8_s8_rows_ref(input_zero_point, input, in_features, e, keep, n_keep, grad, grad_bias);
    return MT_OK;
}

#endif /* MT_LINEAR_BWD_W_S8_S8_REF_H */
