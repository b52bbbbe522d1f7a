/*
 * Max-pool backward of float32 errors for tiling windows (Python twin: fqt_kernels.maxpool_bwd):
 * each window's error goes to its argmax tap, every other input error is 0.
 */
#include "mt_fqt.h"
#include "mt_maxpool_ref.h"

mt_status mt_maxpool_bwd_f32(const mt_pool_params *params,
                             const mt_dims *input_dims,
                             const mt_dims *output_dims,
                             const uint8_t *argmax,
                             const float *e_y,
                             float *e_x)
{
    const int32_t size = input_dims->n * input_dims->h * input_dims->w * input_dims->c;
    int32_t i;
    if (!params || !argmax || !e_y || !e_x || params->stride_h != params->kernel_h ||
        params->stride_w != params->kernel_w) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; ++i) {
        e_x[i] = 0.0f;
    }
    mt_maxpool_bwd_route_ref(params, input_dims, output_dims, argmax, e_y, e_x, MT_POOL_F32);
    return MT_OK;
}
