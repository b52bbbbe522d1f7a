/*
 * Conv2d input error of BP-QAS (transposed convolution, float32; ste_kernels.conv2d_bwd_in_s8_f32
 * computes the same terms). Order, per input element: taps (ky, kx) row-major, each tap's
 * channel sum t = sum_o w * e from 0 in o order, then e_x = ((0 + t0) + t1) + ... (col2im's).
 */
#include "mt_qas_f32_args_ref.h"
#include "mt_train.h"

mt_status mt_conv2d_bwd_in_s8_f32(const mt_conv_params *params,
                                  const mt_dims *output_dims,
                                  const float *e_acc,
                                  const mt_dims *filter_dims,
                                  const int8_t *filter,
                                  const mt_dims *input_dims,
                                  float *e_x)
{
    int32_t n;
    int32_t y;
    int32_t x;
    int32_t c;
    int32_t cg;
    int32_t og;
    if (mt_conv2d_bwd_in_s8_f32_args(params, output_dims, e_acc, filter_dims, filter, input_dims, e_x) != MT_OK) {
        return MT_ERR_ARG;
    }
    cg = filter_dims->c;
    og = filter_dims->n / params->groups;
    for (n = 0; n < input_dims->n; ++n) {
        for (y = 0; y < input_dims->h; ++y) {
            for (x = 0; x < input_dims->w; ++x) {
                for (c = 0; c < input_dims->c; ++c) {
                    const int32_t gi = c / cg;
                    const int32_t i = c - gi * cg;
                    float acc = 0.0f;
                    int32_t ky;
                    for (ky = 0; ky < filter_dims->h; ++ky) {
                        const int32_t py = y + params->pad_top - ky;
                        int32_t kx;
                        int32_t oy;
                        if (py < 0 || py % params->stride_h != 0) {
                            continue;
                        }
                        oy = py / params->stride_h;
                        if (oy >= output_dims->h) {
                            continue;
                        }
                        for (kx = 0; kx < filter_dims->w; ++kx) {
                            const int32_t px = x + params->pad_left - kx;
                            const float *ep;
                            float t = 0.0f;
                            int32_t ox;
                            int32_t j;
                            if (px < 0 || px % params->stride_w != 0) {
                                continue;
                            }
                            ox = px / params->stride_w;
                            if (ox >= output_dims->w) {
                                continue;
                            }
                            ep = e_acc + (((int64_t)n * output_dims->h + oy) * output_dims->w + ox) * output_dims->c;
                            for (j = gi * og; j < gi * og + og; ++j) {
                                const float p = (float)filter[(((int64_t)j * filter_dims->h + ky) * filter_dims->w + kx) * cg + i] * ep[j];
                                t = t + p;
                            }
                            acc = acc + t;
                        }
                    }
                    e_x[(((int64_t)n * input_dims->h + y) * input_dims->w + x) * input_dims->c + c] = acc;
                }
            }
        }
    }
    return MT_OK;
}
