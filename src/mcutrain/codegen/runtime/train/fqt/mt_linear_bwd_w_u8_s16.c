/* Seed A's per-sample uint8 linear weight gradient summed over a batch, as mt_conv2d_bwd_w_u8_s16. */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

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
    int32_t o, i;
    if (!input || !e || !grad16 || !grad_bias || !g_min || !g_max) {
        return MT_ERR_ARG;
    }
    for (o = 0; o < out_features; ++o) {
        const int32_t eo = (int32_t)e[o] - e_zero_point;
        grad_bias[o] += eo;
        for (i = 0; i < in_features; ++i) {
            const int32_t g = eo * ((int32_t)input[i] - input_zero_point);
            const int32_t idx = o * in_features + i;
            *g_min = g < *g_min ? g : *g_min;
            *g_max = g > *g_max ? g : *g_max;
            grad16[idx] = (int16_t)(grad16[idx] + mt_requant_f32_floor(g, multiplier, grad_zero_point, 0, 255) -
                                    grad_zero_point);
        }
    }
    return MT_OK;
}
