/*
 * uint8 linear error propagation, as mt_conv2d_bwd_in_u8 (Python twin: fqt_kernels.linear_bwd_in_acc).
 * mt_linear_bwd_in_u8_keep (partial updates, batch 1, pruned errors at z_e) sums over the kept rows
 * only, as mt_conv2d_bwd_in_u8_keep.
 */
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_fqt_math.h"

/* Both kernels: the reduction over rows keep[0..n) (keep NULL: 0..n) of each sample's errors e. */
MT_INLINE void lin_bwd_in_u8(int32_t batch, const int32_t *keep, int32_t n, int32_t e_zero_point, int32_t w_zero_point,
                             int32_t out_features, const uint8_t *e, const uint8_t *weight, int32_t in_features,
                             float multiplier, int32_t out_zero_point, uint8_t *e_x, int32_t *acc_min,
                             int32_t *acc_max)
{
    int32_t b, i, t;
    for (b = 0; b < batch; ++b) {
        for (i = 0; i < in_features; ++i) {
            int32_t acc = 0;
            for (t = 0; t < n; ++t) {
                const int32_t o = keep ? keep[t] : t;
                acc += ((int32_t)e[b * out_features + o] - e_zero_point) *
                       ((int32_t)weight[o * in_features + i] - w_zero_point);
            }
            *acc_min = acc < *acc_min ? acc : *acc_min;
            *acc_max = acc > *acc_max ? acc : *acc_max;
            if (e_x) {
                e_x[b * in_features + i] = (uint8_t)mt_requant_f32_floor(acc, multiplier, out_zero_point, 0, 255);
            }
        }
    }
}

mt_status mt_linear_bwd_in_u8(int32_t batch,
                              int32_t e_zero_point,
                              int32_t w_zero_point,
                              int32_t out_features,
                              const uint8_t *e,
                              const uint8_t *weight,
                              int32_t in_features,
                              float multiplier,
                              int32_t out_zero_point,
                              uint8_t *e_x,
                              int32_t *acc_min,
                              int32_t *acc_max)
{
    if (!e || !weight || !acc_min || !acc_max || batch < 1) {
        return MT_ERR_ARG;
    }
    lin_bwd_in_u8(batch, NULL, out_features, e_zero_point, w_zero_point, out_features, e, weight, in_features,
                  multiplier, out_zero_point, e_x, acc_min, acc_max);
    return MT_OK;
}

mt_status mt_linear_bwd_in_u8_keep(const int32_t *keep,
                                   int32_t n_keep,
                                   int32_t e_zero_point,
                                   int32_t w_zero_point,
                                   const uint8_t *e,
                                   const uint8_t *weight,
                                   int32_t in_features,
                                   float multiplier,
                                   int32_t out_zero_point,
                                   uint8_t *e_x,
                                   int32_t *acc_min,
                                   int32_t *acc_max)
{
    if (!keep || !e || !weight || !acc_min || !acc_max || n_keep < 0) {
        return MT_ERR_ARG;
    }
    lin_bwd_in_u8(1, keep, n_keep, e_zero_point, w_zero_point, 0, e, weight, in_features, multiplier,
                  out_zero_point, e_x, acc_min, acc_max);
    return MT_OK;
}
