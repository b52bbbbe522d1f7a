/*
 * mcutrain runtime: mt_global_avgpool_fwd_s8_tflite (see mt_nn.h): per channel, TFLite's int8
 * MEAN, clamp(MultiplyByQuantizedMultiplier(sum - z * H * W, M', s') + z, -128, 127).
 */
#include "mt_fixedpoint.h"
#include "mt_nn.h"

mt_status mt_global_avgpool_fwd_s8_tflite(const mt_mean_params *params,
                                          const mt_dims *input_dims,
                                          const int8_t *input,
                                          int8_t *output)
{
    const mt_dims *d = input_dims;
    int32_t n, c, i, count;
    if (!params || !d || !input || !output || d->n < 1 || d->h < 1 || d->w < 1 || d->c < 1 ||
        d->h * d->w > (1 << 23) || params->multiplier < 0 || params->shift < -31 || params->shift > 1) {
        return MT_ERR_ARG;
    }
    count = d->h * d->w;
    for (n = 0; n < d->n; n++) {
        const int8_t *x = input + n * count * d->c;
        for (c = 0; c < d->c; c++) {
            int32_t sum = -params->zero_point * count; /* |sum(x - z)| <= 255 * H * W < 2^31 */
            for (i = 0; i < count; i++) {
                sum += x[i * d->c + c];
            }
            output[n * d->c + c] = mt_requantize_tflite(sum, params->multiplier, params->shift, params->zero_point,
                                                        -128, 127);
        }
    }
    return MT_OK;
}
