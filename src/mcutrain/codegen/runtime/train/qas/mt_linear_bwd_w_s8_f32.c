/* Linear weight gradient of BP-QAS, float32, summed over n in order from 0 (ste_kernels.linear_bwd_w_s8_f32). */
#include "mt_train.h"

mt_status mt_linear_bwd_w_s8_f32(int32_t input_zero_point,
                                 int32_t batch,
                                 const int8_t *input,
                                 int32_t in_features,
                                 const float *e_acc,
                                 int32_t out_features,
                                 float *grad_w)
{
    int32_t n;
    int32_t i;
    int32_t o;
    if (input == NULL || e_acc == NULL || grad_w == NULL || batch < 1 || out_features < 1 || in_features < 1) {
        return MT_ERR_ARG;
    }
    for (o = 0; o < out_features; ++o) {
        for (i = 0; i < in_features; ++i) {
            float acc = 0.0f;
            for (n = 0; n < batch; ++n) {
                const float p = (float)(input[(int64_t)n * in_features + i] - input_zero_point) *
                                e_acc[(int64_t)n * out_features + o];
                acc = acc + p;
            }
            grad_w[(int64_t)o * in_features + i] = acc;
        }
    }
    return MT_OK;
}
