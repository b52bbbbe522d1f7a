/*
 * Error of a tensor read by several nodes (BP-QAS; bp_qas.gradients): the float32 sum of its
 * consumers' errors in the order given, e = ((parts[0] + parts[1]) + parts[2]) + ..., which is the
 * simulator's reverse graph order. Every part of element i is read before e[i] is written, so e may
 * be the storage of any part (the planner places it in place).
 */
#include "mt_train.h"

mt_status mt_error_sum_f32(int32_t size, int32_t count, const float *const *parts, float *e)
{
    int32_t i;
    int32_t p;
    if (parts == NULL || e == NULL || size < 0 || count < 2) {
        return MT_ERR_ARG;
    }
    for (p = 0; p < count; ++p) {
        if (parts[p] == NULL) {
            return MT_ERR_ARG;
        }
    }
    for (i = 0; i < size; ++i) {
        float acc = parts[0][i] + parts[1][i];
        for (p = 2; p < count; ++p) {
            acc = acc + parts[p][i];
        }
        e[i] = acc;
    }
    return MT_OK;
}
