/*
 * Seed A's per-sample uint8 linear weight gradient, as mt_conv2d_bwd_w_u8 (one sample).
 * mt_linear_bwd_w_u8_keep (partial updates) does the kept rows only, as mt_conv2d_bwd_w_u8_keep
 * (Python twin: fqt_kernels.linear_bwd_w_acc and fqt.FQT._weight_grad): 0 joins the range when a
 * row is pruned; pruned rows are not written.
 */
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_linear_bwd_w_u8_ref.h"

mt_status mt_linear_bwd_w_u8(int32_t input_zero_point,
                             int32_t e_zero_point,
                             const uint8_t *input,
                             int32_t in_features,
                             const uint8_t *e,
                             int32_t out_features,
                             float multiplier,
                             int32_t grad_zero_point,
                             uint8_t *grad,
                             int32_t *grad_bias,
                             int32_t *g_min,
                             int32_t *g_max)
{
    if (!input || !e || !grad_bias || !g_min || !g_max) {
        return MT_ERR_ARG;
    }
    mt_linear_bwd_w_u8_ref(NULL, out_features, input_zero_point, e_zero_point, input, in_features, e, multiplier,
                           grad_zero_point, grad, grad_bias, g_min, g_max, 0);
    return MT_OK;
}

mt_status mt_linear_bwd_w_u8_keep(const int32_t *keep,
                                  int32_t n_keep,
                                  int32_t input_zero_point,
                                  int32_t e_zero_point,
                                  const uint8_t *input,
                                  int32_t in_features,
                                  const uint8_t *e,
                                  int32_t out_features,
                                  float multiplier,
                                  int32_t grad_zero_point,
                                  uint8_t *grad,
                                  int32_t *grad_bias,
                                  int32_t *g_min,
                                  int32_t *g_max)
{
    if (!keep || !input || !e || !grad_bias || !g_min || !g_max || n_keep < 0 || n_keep > out_features) {
        return MT_ERR_ARG;
    }
    if (n_keep < out_features && in_features > 0) { /* the pruned rows' products */
        *g_min = 0 < *g_min ? 0 : *g_min;
        *g_max = 0 > *g_max ? 0 : *g_max;
    }
    mt_linear_bwd_w_u8_ref(keep, n_keep, input_zero_point, e_zero_point, input, in_features, e, multiplier,
                           grad_zero_point, grad, grad_bias, g_min, g_max, 0);
    return MT_OK;
}
