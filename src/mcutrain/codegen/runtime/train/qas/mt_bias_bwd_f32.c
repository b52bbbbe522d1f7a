/* Bias gradient of BP-QAS: column sums of the accumulator error in row order (bp_qas._node_bwd). */
#include "mt_train.h"

mt_status mt_bias_bwd_f32(int32_t rows, int32_t channels, const float *e_acc, float *grad_b)
{
    int32_t m;
    int32_t c;
    if (e_acc == NULL || grad_b == NULL || rows < 1 || channels < 1) {
        return MT_ERR_ARG;
    }
    for (c = 0; c < channels; ++c) {
        grad_b[c] = 0.0f;
    }
    for (m = 0; m < rows; ++m) {
        for (c = 0; c < channels; ++c) {
            grad_b[c] = grad_b[c] + e_acc[(int64_t)m * channels + c];
        }
    }
    return MT_OK;
}
