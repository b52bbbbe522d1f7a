/* Global average pooling backward of BP-QAS (ste_kernels.global_avgpool_bwd_f32): e / float32(H * W). */
#include "mt_train.h"

mt_status mt_global_avgpool_bwd_f32(const mt_dims *input_dims, const float *e_y, float *e_x)
{
    int32_t n;
    int32_t p;
    int32_t c;
    float count;
    if (input_dims == NULL || e_y == NULL || e_x == NULL) {
        return MT_ERR_ARG;
    }
    count = (float)(input_dims->h * input_dims->w); /* H * W < 2^24: exact */
    for (n = 0; n < input_dims->n; ++n) {
        for (p = 0; p < input_dims->h * input_dims->w; ++p) {
            for (c = 0; c < input_dims->c; ++c) {
                e_x[((int64_t)n * input_dims->h * input_dims->w + p) * input_dims->c + c] =
                    e_y[(int64_t)n * input_dims->c + c] / count;
            }
        }
    }
    return MT_OK;
}
