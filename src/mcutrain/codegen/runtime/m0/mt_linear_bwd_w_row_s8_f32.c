/*
 * mcutrain runtime: mt_linear_bwd_w_row_s8_f32, the ARMv6-M (Cortex-M0+) twin of
 * train/qas/mt_linear_bwd_w_row_s8_f32.c, bit-exact with it in every case: the same sum over n
 * from +0.0, each step `acc + (float)(x - z_x) * e` in mt_m0_f32_run (mt_m0_f32.h), 32-bit
 * addressing.
 */
#include "mt_m0_f32.h"
#include "mt_qas_f32_args_ref.h"
#include "mt_train.h"

mt_status mt_linear_bwd_w_row_s8_f32(int32_t input_zero_point,
                                     int32_t batch,
                                     const int8_t *input,
                                     int32_t in_features,
                                     const float *e_acc,
                                     int32_t out_features,
                                     int32_t channel,
                                     float *grad_row)
{
    int32_t i;
    if (mt_linear_bwd_w_row_s8_f32_args(batch, input, in_features, e_acc, out_features, channel, grad_row) != MT_OK) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < in_features; ++i) {
        mt_m0_f32 acc = {0u, MT_M0_F32_ZERO, 0u};
        mt_m0_f32_run(&acc, e_acc + channel, out_features, input + i, in_features, input_zero_point, batch);
        grad_row[i] = mt_m0_f32_float(mt_m0_f32_pack(&acc));
    }
    return MT_OK;
}
