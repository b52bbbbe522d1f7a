/*
 * mcutrain runtime: mt_linear_bwd_in_s8_f32, the ARMv6-M (Cortex-M0+) twin of
 * train/qas/mt_linear_bwd_in_s8_f32.c, bit-exact with it in every case: the same sum over o from
 * +0.0, each step `acc + (float)w * e` in mt_m0_f32_run (mt_m0_f32.h), 32-bit addressing.
 */
#include "mt_m0_f32.h"
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
    if (mt_linear_bwd_in_s8_f32_args(batch, out_features, e_acc, weight, in_features, e_x) != MT_OK) {
        return MT_ERR_ARG;
    }
    for (n = 0; n < batch; ++n) {
        const float *e = e_acc + n * out_features;
        for (i = 0; i < in_features; ++i) {
            mt_m0_f32 acc = {0u, MT_M0_F32_ZERO, 0u};
            mt_m0_f32_run(&acc, e, 1, weight + i, in_features, 0, out_features);
            e_x[n * in_features + i] = mt_m0_f32_float(mt_m0_f32_pack(&acc));
        }
    }
    return MT_OK;
}
