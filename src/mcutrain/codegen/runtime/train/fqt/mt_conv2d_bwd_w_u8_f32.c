/*
 * Weight and bias gradients of one sample with float32 errors and uint8 inputs, precision mixed
 * (Python twins: fqt_kernels.conv2d_bwd_w_acc and bias_grad_acc in mode "f32seq"): per weight,
 * t = sum over output positions (y, x) row-major, from +0.0, of e[o] * float32(x - z_x) (positions
 * whose tap falls on padding skipped: real 0), then grad += t (the batch sum in sample order);
 * grad_bias[o] += the sum of e[o] over the positions in order. Zero errors skipped (finite inputs).
 */
#include "mt_fqt.h"

mt_status mt_conv2d_bwd_w_u8_f32(const mt_conv_params *params,
                                 const mt_dims *input_dims,
                                 const uint8_t *input,
                                 const mt_dims *output_dims,
                                 const float *e,
                                 const mt_dims *filter_dims,
                                 float *grad,
                                 float *grad_bias)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t zx = params ? params->input_zero_point : 0;
    int32_t o, i, j, c, y, x;
    if (!params || !input || !e || !grad || !grad_bias || params->groups != 1 || filter_dims->c != c_n ||
        input_dims->n != 1 || output_dims->c != o_n) {
        return MT_ERR_ARG;
    }
    for (o = 0; o < o_n; ++o) {
        float sb = 0.0f;
        for (y = 0; y < ho * wo; ++y) {
            sb += e[y * o_n + o];
        }
        grad_bias[o] += sb;
        for (i = 0; i < kh; ++i) {
            for (j = 0; j < kw; ++j) {
                for (c = 0; c < c_n; ++c) {
                    float t = 0.0f;
                    for (y = 0; y < ho; ++y) {
                        const int32_t iy = y * params->stride_h - params->pad_top + i;
                        if (iy < 0 || iy >= h) {
                            continue;
                        }
                        for (x = 0; x < wo; ++x) {
                            const int32_t ix = x * params->stride_w - params->pad_left + j;
                            const float ev = e[(y * wo + x) * o_n + o];
                            if (ix < 0 || ix >= w || ev == 0.0f) {
                                continue;
                            }
                            t += ev * (float)((int32_t)input[(iy * w + ix) * c_n + c] - zx);
                        }
                    }
                    grad[((o * kh + i) * kw + j) * c_n + c] += t;
                }
            }
        }
    }
    return MT_OK;
}
