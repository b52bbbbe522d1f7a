/* float32 max pooling keeping the first maximum's tap (Python twin: fqt_kernels.maxpool_fwd on floats:
   a later tap wins only if strictly greater). */
#include "mt_fqt.h"

mt_status mt_maxpool_fwd_f32_argmax(const mt_pool_params *params,
                                    const mt_dims *input_dims,
                                    const float *input,
                                    const mt_dims *output_dims,
                                    float *output,
                                    uint8_t *argmax)
{
    const int32_t h = input_dims->h, w = input_dims->w, c = input_dims->c;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    int32_t b, y, x, ch;
    if (!params || !input || !output || params->kernel_h * params->kernel_w > 256) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                const int32_t out = ((b * ho + y) * wo + x) * c;
                for (ch = 0; ch < c; ++ch) {
                    float best = 0.0f;
                    int32_t arg = 0, i, j;
                    for (i = 0; i < params->kernel_h; ++i) {
                        for (j = 0; j < params->kernel_w; ++j) {
                            const float v = input[((b * h + y * params->stride_h + i) * w + x * params->stride_w +
                                                   j) * c + ch];
                            if ((i == 0 && j == 0) || v > best) {
                                best = v;
                                arg = i * params->kernel_w + j;
                            }
                        }
                    }
                    output[out + ch] = best;
                    if (argmax) {
                        argmax[out + ch] = (uint8_t)arg;
                    }
                }
            }
        }
    }
    return MT_OK;
}
