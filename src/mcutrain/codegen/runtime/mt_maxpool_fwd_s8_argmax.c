/*
 * Max pooling that keeps the argmax for the backward pass (Python twin: fqt_kernels.maxpool_fwd):
 * the first maximum in (i, j) tap order wins, its tap index i * kw + j is stored as uint8.
 */
#include "mt_fqt.h"

mt_status mt_maxpool_fwd_s8_argmax(const mt_pool_params *params,
                                   const mt_dims *input_dims,
                                   const int8_t *input,
                                   const mt_dims *output_dims,
                                   int8_t *output,
                                   uint8_t *argmax)
{
    const int32_t h = input_dims->h, w = input_dims->w, c = input_dims->c;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    int32_t b, y, x, ch;
    if (!params || !input || !output || !argmax || params->kernel_h * params->kernel_w > 256) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                const int32_t out = ((b * ho + y) * wo + x) * c;
                for (ch = 0; ch < c; ++ch) {
                    int32_t best = -129;
                    int32_t arg = 0;
                    int32_t i, j;
                    for (i = 0; i < params->kernel_h; ++i) {
                        for (j = 0; j < params->kernel_w; ++j) {
                            const int32_t iy = y * params->stride_h + i, ix = x * params->stride_w + j;
                            const int32_t v = input[((b * h + iy) * w + ix) * c + ch];
                            if (v > best) {
                                best = v;
                                arg = i * params->kernel_w + j;
                            }
                        }
                    }
                    output[out + ch] = (int8_t)best;
                    argmax[out + ch] = (uint8_t)arg;
                }
            }
        }
    }
    return MT_OK;
}
