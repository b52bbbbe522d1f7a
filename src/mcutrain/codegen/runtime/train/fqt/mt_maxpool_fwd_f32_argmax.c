/* float32 max pooling keeping the first maximum's tap (Python twin: fqt_kernels.maxpool_fwd on floats:
   a later tap wins only if strictly greater). */
#include "mt_fqt.h"
#include "mt_maxpool_ref.h"

mt_status mt_maxpool_fwd_f32_argmax(const mt_pool_params *params,
                                    const mt_dims *input_dims,
                                    const float *input,
                                    const mt_dims *output_dims,
                                    float *output,
                                    uint8_t *argmax)
{
    if (!params || !input || !output || params->kernel_h * params->kernel_w > 256) {
        return MT_ERR_ARG;
    }
    mt_maxpool_fwd_argmax_ref(params, input_dims, input, output_dims, output, argmax, MT_POOL_F32);
    return MT_OK;
}
