/*
 * Conv weight and bias gradients from the kept int8 input and int8 errors, accumulated in int32
 * (Python twin: fqt_kernels.conv2d_bwd_w_acc and bias_grad_acc in mode "int"; exact in any order).
 * NOTE: |g| <= 127 * 255 * positions * samples < 2^31 for fewer than 66 000 position-samples.
 */
#include "mt_fqt.h"

mt_status mt_conv2d_bwd_w_s8_s8(const mt_conv_params *params,
                                const mt_dims *input_dims,
                                const int8_t *input,
                                const mt_dims *output_dims,
                                const int8_t *e,
                                const mt_dims *filter_dims,
                                int32_t *grad,
                                int32_t *grad_bias)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t zx = params ? params->input_zero_point : 0;
    int32_t b, y, x, o;
    if (!params || !input || !e || !grad || !grad_bias || params->groups != 1 || filter_dims->c != c_n) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                const int8_t *pe = e + ((b * ho + y) * wo + x) * o_n;
                for (o = 0; o < o_n; ++o) {
                    const int32_t eo = pe[o];
                    int32_t *g = grad + o * kh * kw * c_n;
                    int32_t i, j, c;
                    if (eo == 0) {
                        continue; /* exact: a zero error adds nothing */
                    }
                    grad_bias[o] += eo;
                    for (i = 0; i < kh; ++i) {
                        const int32_t iy = y * params->stride_h - params->pad_top + i;
                        if (iy < 0 || iy >= h) {
                            continue;
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t ix = x * params->stride_w - params->pad_left + j;
                            const int8_t *px;
                            int32_t *gt;
                            if (ix < 0 || ix >= w) {
                                continue;
                            }
                            px = input + ((b * h + iy) * w + ix) * c_n;
                            gt = g + (i * kw + j) * c_n;
                            for (c = 0; c < c_n; ++c) {
                                gt[c] += eo * ((int32_t)px[c] - zx);
                            }
                        }
                    }
                }
            }
        }
    }
    return MT_OK;
}
