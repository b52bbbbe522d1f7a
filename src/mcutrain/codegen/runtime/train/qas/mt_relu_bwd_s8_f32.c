/* Standalone relu/relu6 backward of BP-QAS: pass the error where the output is not clamped. */
#include "mt_train.h"

mt_status mt_relu_bwd_s8_f32(int32_t act_min, int32_t act_max, int32_t size, const int8_t *y,
                             const float *e_y, float *e_x)
{
    int32_t i;
    if (y == NULL || e_y == NULL || e_x == NULL || size < 0) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; ++i) {
        e_x[i] = (y[i] > act_min && y[i] < act_max) ? e_y[i] : 0.0f;
    }
    return MT_OK;
}
