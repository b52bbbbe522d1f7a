/* Linear error propagation, precision float32 (Python twin: fqt_kernels.linear_bwd_in_acc, "f32seq"):
   e_x[b, i] = sum over o in order from +0.0 of e[b, o] * w[o, i].
   mt_linear_bwd_in_f32_keep: batch 1, the kept rows only (exact, see mt_conv2d_bwd_in_f32). */
#include "mt_arch.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"

/* Both kernels: the sums over rows keep[0..n) (keep NULL: 0..n) of each sample's errors. */
MT_INLINE void lin_bwd_in_f32(int32_t batch, const int32_t *keep, int32_t n, int32_t out_features, const float *e,
                              const float *weight, int32_t in_features, float *e_x)
{
    int32_t b, i, o;
    for (b = 0; b < batch; ++b) {
        const float *eb = e + b * out_features;
        for (i = 0; i < in_features; ++i) {
            float acc = 0.0f;
            for (o = 0; o < n; ++o) {
                const int32_t k = keep ? keep[o] : o;
                acc += eb[k] * weight[k * in_features + i];
            }
            e_x[b * in_features + i] = acc;
        }
    }
}

mt_status mt_linear_bwd_in_f32(int32_t batch,
                               int32_t out_features,
                               const float *e,
                               const float *weight,
                               int32_t in_features,
                               float *e_x)
{
    if (!e || !weight || !e_x || batch < 1) {
        return MT_ERR_ARG;
    }
    lin_bwd_in_f32(batch, NULL, out_features, out_features, e, weight, in_features, e_x);
    return MT_OK;
}

mt_status mt_linear_bwd_in_f32_keep(const int32_t *keep,
                                    int32_t n_keep,
                                    const float *e,
                                    const float *weight,
                                    int32_t in_features,
                                    float *e_x)
{
    if (!keep || !e || !weight || !e_x || n_keep < 0) {
        return MT_ERR_ARG;
    }
    lin_bwd_in_f32(1, keep, n_keep, 0, e, weight, in_features, e_x);
    return MT_OK;
}
