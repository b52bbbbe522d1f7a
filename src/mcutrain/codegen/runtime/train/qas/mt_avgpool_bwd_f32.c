/*
 * Average pooling backward of BP-QAS (ste_kernels.avgpool_bwd_f32): e_y / float32(kh * kw) to
 * every tap of the window, taps outer so that overlapping shares add in tap order.
 */
#include "mt_train.h"

mt_status mt_avgpool_bwd_f32(const mt_pool_params *params,
                             const mt_dims *input_dims,
                             const mt_dims *output_dims,
                             const float *e_y,
                             float *e_x)
{
    int64_t i;
    int32_t ky;
    int32_t kx;
    float count;
    if (params == NULL || input_dims == NULL || output_dims == NULL || e_y == NULL || e_x == NULL ||
        output_dims->c != input_dims->c || output_dims->n != input_dims->n) {
        return MT_ERR_ARG;
    }
    count = (float)(params->kernel_h * params->kernel_w);
    for (i = 0; i < (int64_t)input_dims->n * input_dims->h * input_dims->w * input_dims->c; ++i) {
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
                        const int32_t y = oy * params->stride_h + ky;
                        const int32_t x = ox * params->stride_w + kx;
                        const float *src = e_y + (((int64_t)n * output_dims->h + oy) * output_dims->w + ox) * input_dims->c;
                        float *dst = e_x + (((int64_t)n * input_dims->h + y) * input_dims->w + x) * input_dims->c;
                        int32_t c;
                        for (c = 0; c < input_dims->c; ++c) {
                            dst[c] = dst[c] + src[c] / count;
                        }
                    }
                }
            }
        }
    }
    return MT_OK;
}
