/* uint8 max pooling keeping the first maximum's tap (Python twin: fqt_kernels.maxpool_fwd). */
#include "mt_fqt.h"
#include "mt_maxpool_ref.h"

mt_status mt_maxpool_fwd_u8_argmax(const mt_pool_params *params,
                                   const mt_dims *input_dims,
                                   const uint8_t *input,
                                   const mt_dims *output_dims,
                                   uint8_t *output,
                                   uint8_t *argmax)
{
    if (!params || !input || !output || params->kernel_h * params->kernel_w > 256) {
        return MT_ERR_ARG;
    }
    mt_maxpool_fwd_argmax_ref(params, input_dims, input, output_dims, output, argmax, MT_POOL_U8);
    return MT_OK;
}
