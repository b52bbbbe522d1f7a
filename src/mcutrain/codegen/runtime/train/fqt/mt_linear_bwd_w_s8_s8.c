/*
 * Linear weight and bias gradients from the kept int8 input and int8 errors, accumulated in int32
 * (Python twin: fqt_kernels.linear_bwd_w_acc and bias_grad_acc in mode "int").
 * Rows with a zero error are skipped (exact: they add nothing).
 * mt_linear_bwd_w_s8_s8_keep (partial updates, one sample) zeroes the kept rows, then runs the same
 * loops over them only; the pruned rows (zero errors) are not touched.
 * Reference kernel (mt_linear_bwd_w_s8_s8_ref.h); dsp/mt_linear_bwd_w_s8_s8.c is its DSP twin.
 */
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_linear_bwd_w_s8_s8_ref.h"

mt_status mt_linear_bwd_w_s8_s8(int32_t input_zero_point,
                                int32_t batch,
                                const int8_t *input,
                                int32_t in_features,
                                const int8_t *e,
                                int32_t out_features,
                                int32_t *grad,
                                int32_t *grad_bias)
{
    return mt_linear_bwd_w_s8_s8_with(input_zero_point, batch, input, in_features, e, out_features, grad, grad_bias,
                                      NULL);
}

mt_status mt_linear_bwd_w_s8_s8_keep(int32_t input_zero_point,
                                     const int32_t *keep,
                                     int32_t n_keep,
                                     const int8_t *input,
                                     int32_t in_features,
                                     const int8_t *e,
                                     int32_t *grad,
                                     int32_t *grad_bias)
{
    return mt_linear_bwd_w_s8_s8_keep_with(input_zero_point, keep, n_keep, input, in_features, e, grad, grad_bias,
                                           NULL);
}
