/* SGD momentum of BP-QAS (methods/bp_qas.py): v = momentum * v + g, float32, no FMA. */
#include "mt_train.h"

mt_status mt_sgd_momentum_f32(int32_t size, float momentum, const float *grad, float *velocity)
{
    int32_t i;
    if (grad == NULL || velocity == NULL || size < 0) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; ++i) {
        const float mv = momentum * velocity[i];
        velocity[i] = mv + grad[i];
    }
    return MT_OK;
}
