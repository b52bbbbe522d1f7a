/*
 * Residual add backward of BP-QAS (ste_kernels.add_bwd_f32): masked error times s_in / s_y. An
 * input that needs no error (it is frozen upstream) gets NULL; e_a or e_b may be e_y's storage.
 */
#include "mt_train.h"

mt_status mt_add_bwd_s8_f32(int32_t size,
                            const float *e_y,
                            const int8_t *y,
                            float ratio_a,
                            float ratio_b,
                            int32_t act_min,
                            int32_t act_max,
                            float *e_a,
                            float *e_b)
{
    int32_t i;
    if (e_y == NULL || y == NULL || (e_a == NULL && e_b == NULL) || size < 0) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; ++i) {
        const float e = (y[i] > act_min && y[i] < act_max) ? e_y[i] : 0.0f;
        if (e_a != NULL) {
            e_a[i] = e * ratio_a;
        }
        if (e_b != NULL) {
            e_b[i] = e * ratio_b;
        }
    }
    return MT_OK;
}
