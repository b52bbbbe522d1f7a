/* Exact int64 local weight gradient of a linear layer (ZO NP recovery, integer-semantics 12.4). */
#include "mt_train.h"

mt_status mt_linear_bwd_w_s8_s32(int32_t input_zero_point,
                                 int32_t batch,
                                 const int8_t *input,
                                 int32_t in_features,
                                 const int32_t *g,
                                 int32_t out_features,
                                 int64_t *grad_w,
                                 int64_t *grad_b)
{
    int32_t n;
    int32_t o;
    int32_t i;
    if (input == NULL || g == NULL || grad_w == NULL || batch < 1 || in_features < 1 || out_features < 1) {
        return MT_ERR_ARG;
    }
    for (o = 0; o < out_features; ++o) {
        int64_t *row = grad_w + (int64_t)o * in_features;
        int64_t gb = 0;
        for (i = 0; i < in_features; ++i) {
            row[i] = 0;
        }
        for (n = 0; n < batch; ++n) {
            const int64_t go = g[(int64_t)n * out_features + o];
            const int8_t *x = input + (int64_t)n * in_features;
            gb += go;
            if (go == 0) {
                continue;
            }
            for (i = 0; i < in_features; ++i) {
                row[i] += (int64_t)(x[i] - input_zero_point) * go; /* < 2^39 per product */
            }
        }
        if (grad_b != NULL) {
            grad_b[o] = gb;
        }
    }
    return MT_OK;
}
