/*
 * Weight and bias gradients of the kept filters of a partial update, precision float32 (Python
 * twins: fqt_kernels.conv2d_bwd_w_acc and bias_grad_acc, "f32seq", on the kept rows): the order of
 * mt_conv2d_bwd_w_f32, each kept element written as +0.0 + its sum (what the dense kernel adds into
 * the zeroed buffer); pruned rows are not written (the masked update does not read them).
 */
#include "mt_fqt_keep.h"

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
    int32_t h, w, c_n, o_n, kh, kw, ho, wo, t, i, j, c, y, x;
    if (!params || !keep || !input || !e || !grad || !grad_bias || params->groups != 1 ||
        filter_dims->c != input_dims->c || input_dims->n != 1 || output_dims->c != filter_dims->n ||
        n_keep < 0 || n_keep > filter_dims->n) {
        return MT_ERR_ARG;
    }
    h = input_dims->h;
    w = input_dims->w;
    c_n = input_dims->c;
    o_n = filter_dims->n;
    kh = filter_dims->h;
    kw = filter_dims->w;
    ho = output_dims->h;
    wo = output_dims->w;
    for (t = 0; t < n_keep; ++t) {
        const int32_t o = keep[t];
        float sb = 0.0f;
        for (y = 0; y < ho * wo; ++y) {
            sb += e[y * o_n + o];
        }
        grad_bias[o] = 0.0f + sb;
        for (i = 0; i < kh; ++i) {
            for (j = 0; j < kw; ++j) {
                for (c = 0; c < c_n; ++c) {
                    float s = 0.0f;
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
                            s += e[(y * wo + x) * o_n + o] * input[(iy * w + ix) * c_n + c];
                        }
                    }
                    grad[((o * kh + i) * kw + j) * c_n + c] = 0.0f + s;
                }
            }
        }
    }
    return MT_OK;
}
