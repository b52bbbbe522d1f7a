/*
 * Max pooling that keeps the argmax for the backward pass (Python twin: fqt_kernels.maxpool_fwd):
 * the first maximum in (i, j) tap order wins, its tap index i * kw + j is stored as uint8.
 * Reference kernel (mt_maxpool_ref.h); dsp/mt_maxpool_fwd_s8_argmax.c is its DSP twin.
 */
#include "mt_fqt.h"
#include "mt_maxpool_ref.h"

mt_status mt_maxpool_fwd_s8_argmax(const mt_pool_params *params,
                                   const mt_dims *input_dims,
                                   const int8_t *input,
                                   const mt_dims *output_dims,
                                   int8_t *output,
                                   uint8_t *argmax)
{
    if (!params || !input || !output || !argmax || params->kernel_h * params->kernel_w > 256) {
        return MT_ERR_ARG;
    }
    mt_maxpool_fwd_argmax_ref(params, input_dims, input, output_dims, output, argmax, MT_POOL_S8);
    return MT_OK;
}
