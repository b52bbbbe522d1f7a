/*
 * Conv weight and bias gradients from the kept int8 input and int8 errors, accumulated in int32
 * (Python twin: fqt_kernels.conv2d_bwd_w_acc and bias_grad_acc in mode "int"; exact in any order).
 * mt_conv2d_bwd_w_s8_s8_keep (partial updates) zeroes the kept rows, then runs the same loops over
 * the kept filters only (keep[t] for t, the errors in the full layout); the pruned rows (zero errors)
 * are not touched, which the masked update never reads.
 * NOTE: |g| <= 127 * 255 * positions * samples < 2^31 for fewer than 66 000 position-samples; the
 * bound holds for partial sums in any order, so the DSP order gives the same sums.
 * Reference kernel (mt_conv2d_bwd_w_s8_s8_ref.h); dsp/mt_conv2d_bwd_w_s8_s8.c is its DSP twin.
 */
#include "mt_conv2d_bwd_w_s8_s8_ref.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"

mt_status mt_conv2d_bwd_w_s8_s8(const mt_conv_params *params,
                                const mt_dims *input_dims,
                                const int8_t *input,
                                const mt_dims *output_dims,
                                const int8_t *e,
                                const mt_dims *filter_dims,
                                int32_t *grad,
                                int32_t *grad_bias)
{
    return mt_conv2d_bwd_w_s8_s8_with(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias,
                                      mt_conv2d_bwd_w_s8_s8_filters_ref);
}

mt_status mt_conv2d_bwd_w_s8_s8_keep(const mt_conv_params *params,
                                     const int32_t *keep,
                                     int32_t n_keep,
                                     const mt_dims *input_dims,
                                     const int8_t *input,
                                     const mt_dims *output_dims,
                                     const int8_t *e,
                                     const mt_dims *filter_dims,
                                     int32_t *grad,
                                     int32_t *grad_bias)
{
    return mt_conv2d_bwd_w_s8_s8_keep_with(params, keep, n_keep, input_dims, input, output_dims, e, filter_dims,
                                           grad, grad_bias, mt_conv2d_bwd_w_s8_s8_filters_ref);
}
