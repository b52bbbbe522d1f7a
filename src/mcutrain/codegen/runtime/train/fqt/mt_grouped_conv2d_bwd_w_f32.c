/*
 * Weight and bias gradients of one sample of a grouped/depthwise conv with float32 errors, accumulated,
 * precisions float32 (float32 inputs) and mixed (uint8 inputs as float32(x - z_x); Python twins:
 * fqt_kernels.conv2d_bwd_w_acc, groups > 1, and bias_grad_acc in mode "f32seq"): per weight,
 * t = the sum over output positions (y, x) row-major from +0.0 of e[o] * x (padding skipped), then
 * grad += t; grad_bias[o] += the sum of e[o] over the positions in order. A batch adds its samples
 * into the zeroed buffers in order (the twin's batch sum from +0.0).
 */
#include "mt_arch.h"
#include "mt_fqt.h"

MT_INLINE float input_at(const float *xf, const uint8_t *xu, int32_t zx, int32_t idx)
{
    return xf ? xf[idx] : (float)((int32_t)xu[idx] - zx);
}

MT_INLINE mt_status bwd_w(const mt_conv_params *params, const mt_dims *input_dims, const float *xf,
                          const uint8_t *xu, const mt_dims *output_dims, const float *e, const mt_dims *filter_dims,
                          float *grad, float *grad_bias)
{
    int32_t h, w, c_n, o_n, kh, kw, cig, opg, ho, wo, zx, o, i, j, c, y, x;
    if (!params || !input_dims || (!xf && !xu) || !output_dims || !e || !filter_dims || !grad || !grad_bias ||
        params->groups < 1 || input_dims->n != 1) {
        return MT_ERR_ARG;
    }
    h = input_dims->h;
    w = input_dims->w;
    c_n = input_dims->c;
    o_n = filter_dims->n;
    kh = filter_dims->h;
    kw = filter_dims->w;
    cig = filter_dims->c;
    opg = o_n / params->groups;
    ho = output_dims->h;
    wo = output_dims->w;
    zx = params->input_zero_point;
    if (cig * params->groups != c_n || opg * params->groups != o_n || output_dims->c != o_n) {
        return MT_ERR_ARG;
    }
    for (o = 0; o < o_n; ++o) {
        const int32_t c0 = (o / opg) * cig;
        float sb = 0.0f;
        for (y = 0; y < ho * wo; ++y) {
            sb += e[y * o_n + o];
        }
        grad_bias[o] += sb;
        for (i = 0; i < kh; ++i) {
            for (j = 0; j < kw; ++j) {
                for (c = 0; c < cig; ++c) {
                    float t = 0.0f;
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
                            t += e[(y * wo + x) * o_n + o] * input_at(xf, xu, zx, (iy * w + ix) * c_n + c0 + c);
                        }
                    }
                    grad[((o * kh + i) * kw + j) * cig + c] += t;
                }
            }
        }
    }
    return MT_OK;
}

mt_status mt_grouped_conv2d_bwd_w_f32(const mt_conv_params *params,
                                      const mt_dims *input_dims,
                                      const float *input,
                                      const mt_dims *output_dims,
                                      const float *e,
                                      const mt_dims *filter_dims,
                                      float *grad,
                                      float *grad_bias)
{
    if (!input) {
        return MT_ERR_ARG;
    }
    return bwd_w(params, input_dims, input, NULL, output_dims, e, filter_dims, grad, grad_bias);
}

mt_status mt_grouped_conv2d_bwd_w_u8_f32(const mt_conv_params *params,
                                         const mt_dims *input_dims,
                                         const uint8_t *input,
                                         const mt_dims *output_dims,
                                         const float *e,
                                         const mt_dims *filter_dims,
                                         float *grad,
                                         float *grad_bias)
{
    if (!input) {
        return MT_ERR_ARG;
    }
    return bwd_w(params, input_dims, NULL, input, output_dims, e, filter_dims, grad, grad_bias);
}
