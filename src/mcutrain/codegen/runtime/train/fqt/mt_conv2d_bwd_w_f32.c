/*
 * Weight and bias gradients of one sample with float32 errors and inputs, precision float32 (Python
 * twins: fqt_kernels.conv2d_bwd_w_acc and bias_grad_acc in mode "f32seq"): per weight,
 * t = sum over output positions (y, x) row-major, from +0.0, of e[o] * x (padding taps skipped),
 * then grad += t; grad_bias[o] += the sum of e[o] over the positions in order.
 *
 * mt_conv2d_bwd_w_f32_keep (partial updates) runs the same order over the kept filters only, each
 * kept element written as +0.0 + its sum (what the dense kernel adds into the zeroed buffer);
 * pruned rows are not written (the masked update does not read them).
 */
#include "mt_arch.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"

/* Both kernels: filters keep[0..n) (keep NULL: 0..n), their sums added to grad (add) or to +0.0. */
MT_INLINE void bwd_w_f32(const mt_conv_params *params, const int32_t *keep, int32_t n, int add,
                         const mt_dims *input_dims, const float *input, const mt_dims *output_dims, const float *e,
                         const mt_dims *filter_dims, float *grad, float *grad_bias)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    int32_t k, i, j, c, y, x;
    for (k = 0; k < n; ++k) {
        const int32_t o = keep ? keep[k] : k;
        float sb = 0.0f;
        for (y = 0; y < ho * wo; ++y) {
            sb += e[y * o_n + o];
        }
        grad_bias[o] = (add ? grad_bias[o] : 0.0f) + sb;
        for (i = 0; i < kh; ++i) {
            for (j = 0; j < kw; ++j) {
                for (c = 0; c < c_n; ++c) {
                    float t = 0.0f;
                    float *g = &grad[((o * kh + i) * kw + j) * c_n + c];
                    for (y = 0; y < ho; ++y) {
                        const int32_t iy = y * params->stride_h - params->pad_top + i;
                        if (iy < 0 || iy >= h) {
                            continue;
                        }
                        for (x = 0; x < wo; ++x) {
                            const int32_t ix = x * params->stride_w - params->pad_left + j;
                            if (ix < 0 || ix >= w) {
                                continue;
                            }
                            t += e[(y * wo + x) * o_n + o] * input[(iy * w + ix) * c_n + c];
                        }
                    }
                    *g = (add ? *g : 0.0f) + t;
                }
            }
        }
    }
}

mt_status mt_conv2d_bwd_w_f32(const mt_conv_params *params,
                              const mt_dims *input_dims,
                              const float *input,
                              const mt_dims *output_dims,
                              const float *e,
                              const mt_dims *filter_dims,
                              float *grad,
                              float *grad_bias)
{
    if (!params || !input || !e || !grad || !grad_bias || params->groups != 1 || filter_dims->c != input_dims->c ||
        input_dims->n != 1 || output_dims->c != filter_dims->n) {
        return MT_ERR_ARG;
    }
    bwd_w_f32(params, NULL, filter_dims->n, 1, input_dims, input, output_dims, e, filter_dims, grad, grad_bias);
    return MT_OK;
}

mt_status mt_conv2d_bwd_w_f32_keep(const mt_conv_params *params,
                                   const int32_t *keep,
                                   int32_t n_keep,
                                   const mt_dims *input_dims,
                                   const float *input,
                                   const mt_dims *output_dims,
                                   const float *e,
                                   const mt_dims *filter_dims,
                                   float *grad,
                                   float *grad_bias)
{
    if (!params || !keep || !input || !e || !grad || !grad_bias || params->groups != 1 ||
        filter_dims->c != input_dims->c || input_dims->n != 1 || output_dims->c != filter_dims->n ||
        n_keep < 0 || n_keep > filter_dims->n) {
        return MT_ERR_ARG;
    }
    bwd_w_f32(params, keep, n_keep, 0, input_dims, input, output_dims, e, filter_dims, grad, grad_bias);
    return MT_OK;
}
