/*
 * Max-pool backward of int8 errors for tiling windows (Python twin: fqt_kernels.maxpool_bwd, the
 * stride == kernel path): plain stores, so no sum can leave the int8 range.
 * Reference kernel (mt_maxpool_ref.h); dsp/mt_maxpool_bwd_s8.c is its DSP twin.
 */
#include <string.h>

#include "mt_fqt.h"
#include "mt_maxpool_ref.h"

mt_status mt_maxpool_bwd_s8(const mt_pool_params *params,
                            const mt_dims *input_dims,
                            const mt_dims *output_dims,
                            const uint8_t *argmax,
                            const int8_t *e_y,
                            int8_t *e_x)
{
    if (!params || !argmax || !e_y || !e_x || params->stride_h != params->kernel_h ||
        params->stride_w != params->kernel_w) {
        return MT_ERR_ARG;
    }
    memset(e_x, 0, (size_t)(input_dims->n * input_dims->h * input_dims->w * input_dims->c));
    mt_maxpool_bwd_route_ref(params, input_dims, output_dims, argmax, e_y, e_x, MT_POOL_S8);
    return MT_OK;
}
