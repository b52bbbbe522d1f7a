/* Seed A's per-sample uint8 linear weight gradient summed over a batch, as mt_conv2d_bwd_w_u8_s16. */
#include "mt_fqt.h"
#include "mt_linear_bwd_w_u8_ref.h"

mt_status mt_linear_bwd_w_u8_s16(int32_t input_zero_point,
                                 int32_t e_zero_point,
                                 const uint8_t *input,
                                 int32_t in_features,
                                 const uint8_t *e,
                                 int32_t out_features,
                                 float multiplier,
                                 int32_t grad_zero_point,
                                 int16_t *grad16,
                                 int32_t *grad_bias,
                                 int32_t *g_min,
                                 int32_t *g_max)
{
    if (!input || !e || !grad16 || !grad_bias || !g_min || !g_max) {
        return MT_ERR_ARG;
    }
    mt_linear_bwd_w_u8_ref(NULL, out_features, input_zero_point, e_zero_point, input, in_features, e, multiplier,
                           grad_zero_point, grad16, grad_bias, g_min, g_max, 1);
    return MT_OK;
}
