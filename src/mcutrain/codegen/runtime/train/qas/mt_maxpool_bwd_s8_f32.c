/*
 * Max pooling backward of BP-QAS (ste_kernels.maxpool_bwd_s8_f32): each window's error goes to
 * its first maximum in row-major tap order. Taps are the outer loop so that an input element
 * shared by overlapping windows receives its shares in tap order, as the numpy tap loop adds them.
 */
#include "mt_train.h"

mt_status mt_maxpool_bwd_s8_f32(const mt_pool_params *params,
                                const mt_dims *input_dims,
                                const int8_t *input,
                                const mt_dims *output_dims,
                                const int8_t *output,
                                const float *e_y,
                                float *e_x)
{
    int64_t i;
    int32_t ky;
    int32_t kx;
    const int32_t c_n = input_dims != NULL ? input_dims->c : 0;
    if (params == NULL || input_dims == NULL || input == NULL || output_dims == NULL || output == NULL ||
        e_y == NULL || e_x == NULL || output_dims->c != c_n || output_dims->n != input_dims->n) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < (int64_t)input_dims->n * input_dims->h * input_dims->w * c_n; ++i) {
        e_x[i] = 0.0f;
    }
    for (ky = 0; ky < params->kernel_h; ++ky) {
        for (kx = 0; kx < params->kernel_w; ++kx) {
            int32_t n;
            for (n = 0; n < output_dims->n; ++n) {
                int32_t oy;
                for (oy = 0; oy < output_dims->h; ++oy) {
                    int32_t ox;
                    for (ox = 0; ox < output_dims->w; ++ox) {
                        const int64_t obase = (((int64_t)n * output_dims->h + oy) * output_dims->w + ox) * c_n;
                        int32_t c;
                        for (c = 0; c < c_n; ++c) {
                            const int8_t top = output[obase + c];
                            int32_t t;
                            int32_t first = -1;
                            /* the first tap of the window holding the maximum */
                            for (t = 0; t < params->kernel_h * params->kernel_w && first < 0; ++t) {
                                const int32_t y = oy * params->stride_h + t / params->kernel_w;
                                const int32_t x = ox * params->stride_w + t % params->kernel_w;
                                if (input[(((int64_t)n * input_dims->h + y) * input_dims->w + x) * c_n + c] == top) {
                                    first = t;
                                }
                            }
                            if (first == ky * params->kernel_w + kx) {
                                const int32_t y = oy * params->stride_h + ky;
                                const int32_t x = ox * params->stride_w + kx;
                                float *dst = e_x + (((int64_t)n * input_dims->h + y) * input_dims->w + x) * c_n + c;
                                *dst = *dst + e_y[obase + c];
                            }
                        }
                    }
                }
            }
        }
    }
    return MT_OK;
}
