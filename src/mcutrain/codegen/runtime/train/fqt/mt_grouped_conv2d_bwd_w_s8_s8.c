/*
 * Weight and bias gradients of a grouped conv (depthwise included) from the stored input and int8
 * errors (Python twin: fqt_kernels.conv2d_bwd_w_acc in mode "int", groups > 1, and bias_grad_acc),
 * accumulated into int32 buffers: g[o, i, j, c] += sum over output positions of
 * e[o] * (x[.., g * cig + c] - z_x) (padding is real 0), gb[o] += sum of e[o].
 * NOTE: each element sums one product per output position, |e * (x - z_x)| <= 127 * 255, so
 * int32 holds batch * positions <= 66311 products (the exporter checks the bound).
 * Reference kernel (mt_grouped_conv2d_bwd_w_s8_s8_ref.h); dsp/mt_grouped_conv2d_bwd_w_s8_s8.c is its
 * DSP twin.
 */
#include "mt_grouped_conv2d_bwd_w_s8_s8_ref.h"

mt_status mt_grouped_conv2d_bwd_w_s8_s8(const mt_conv_params *params,
                                        const mt_dims *input_dims,
                                        const int8_t *input,
                                        const mt_dims *output_dims,
                                        const int8_t *e,
                                        const mt_dims *filter_dims,
                                        int32_t *grad,
                                        int32_t *grad_bias)
{
    return mt_grouped_conv2d_bwd_w_s8_s8_ref(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias);
}
