/* Linear input error of BP-QAS, float32, summed over o in order from 0 (ste_kernels.linear_bwd_in_s8_f32). */
#include "mt_qas_f32_args_ref.h"
#include "mt_train.h"

mt_status mt_linear_bwd_in_s8_f32(int32_t batch,
                                  int32_t out_features,
                                  const float *e_acc,
                                  const int8_t *weight,
                                  int32_t in_features,
                                  float *e_x)
{
    int32_t n;
    int32_t i;
    int32_t o;
    if (mt_linear_bwd_in_s8_f32_args(batch, out_features, e_acc, weight, in_features, e_x) != MT_OK) {
        return MT_ERR_ARG;
    }
    for (n = 0; n < batch; ++n) {
        const float *e = e_acc + (int64_t)n * out_features;
        for (i = 0; i < in_features; ++i) {
            float acc = 0.0f;
            for (o = 0; o < out_features; ++o) {
                const float p = (float)weight[(int64_t)o * in_features + i] * e[o];
                acc = acc + p;
            }
            e_x[(int64_t)n * in_features + i] = acc;
        }
    }
    return MT_OK;
}
