/*
 * mcutrain runtime: mt_relu_fwd_s8, a standalone relu / relu6 as a clamp (see mt_nn.h).
 */
#include "mt_nn.h"

mt_status mt_relu_fwd_s8(int32_t act_min, int32_t act_max, int32_t size, const int8_t *input, int8_t *output)
{
    int32_t i;
    if (!input || !output || size < 1 || act_min > act_max) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        int32_t v = input[i];
        v = v < act_min ? act_min : v;
        v = v > act_max ? act_max : v;
        output[i] = (int8_t)v;
    }
    return MT_OK;
}
