/*
 * Max-pool backward of uint8 errors for tiling windows (Python twin: fqt_kernels.maxpool_bwd on
 * centred errors): the window's error goes to its argmax, every other input gets the zero point
 * (a centred 0).
 */
#include <string.h>

#include "mt_fqt.h"
#include "mt_maxpool_ref.h"

mt_status mt_maxpool_bwd_u8(const mt_pool_params *params,
                            int32_t e_zero_point,
                            const mt_dims *input_dims,
                            const mt_dims *output_dims,
                            const uint8_t *argmax,
                            const uint8_t *e_y,
                            uint8_t *e_x)
{
    const int32_t h = input_dims->h, w = input_dims->w, c = input_dims->c;
    if (!params || !argmax || !e_y || !e_x || params->stride_h != params->kernel_h ||
        params->stride_w != params->kernel_w) {
        return MT_ERR_ARG;
    }
    memset(e_x, e_zero_point, (size_t)(input_dims->n * h * w * c));
    mt_maxpool_bwd_route_ref(params, input_dims, output_dims, argmax, e_y, e_x, MT_POOL_U8);
    return MT_OK;
}
