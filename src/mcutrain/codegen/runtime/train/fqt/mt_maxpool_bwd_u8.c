/*
 * Max-pool backward of uint8 errors for tiling windows (Python twin: fqt_kernels.maxpool_bwd on
 * centred errors): the window's error goes to its argmax, every other input gets the zero point
 * (a centred 0).
 */
#include <string.h>

#include "mt_fqt.h"

mt_status mt_maxpool_bwd_u8(const mt_pool_params *params,
                            int32_t e_zero_point,
                            const mt_dims *input_dims,
                            const mt_dims *output_dims,
                            const uint8_t *argmax,
                            const uint8_t *e_y,
                            uint8_t *e_x)
{
    const int32_t h = input_dims->h, w = input_dims->w, c = input_dims->c;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    int32_t b, y, x, ch;
    if (!params || !argmax || !e_y || !e_x || params->stride_h != params->kernel_h ||
        params->stride_w != params->kernel_w) {
        return MT_ERR_ARG;
    }
    memset(e_x, e_zero_point, (size_t)(input_dims->n * h * w * c));
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                const int32_t out = ((b * ho + y) * wo + x) * c;
                for (ch = 0; ch < c; ++ch) {
                    const int32_t t = argmax[out + ch];
                    const int32_t iy = y * params->stride_h + t / params->kernel_w;
                    const int32_t ix = x * params->stride_w + t % params->kernel_w;
                    e_x[((b * h + iy) * w + ix) * c + ch] = e_y[out + ch];
                }
            }
        }
    }
    return MT_OK;
}
