/*
 * mcutrain runtime: mt_global_avgpool_fwd_s8 (see mt_nn.h): per channel,
 * round_half_away(sum over H and W / (H * W)).
 */
#include "mt_fixedpoint.h"
#include "mt_nn.h"

mt_status mt_global_avgpool_fwd_s8(const mt_dims *input_dims, const int8_t *input, int8_t *output)
{
    const mt_dims *d = input_dims;
    int32_t n, c, i, count;
    if (!d || !input || !output || d->n < 1 || d->h < 1 || d->w < 1 || d->c < 1 || d->h * d->w >= (1 << 24)) {
        return MT_ERR_ARG;
    }
    count = d->h * d->w;
    for (n = 0; n < d->n; n++) {
        const int8_t *x = input + n * count * d->c;
        for (c = 0; c < d->c; c++) {
            int32_t sum = 0; /* |sum| <= H * W * 128 < 2^31 */
            for (i = 0; i < count; i++) {
                sum += x[i * d->c + c];
            }
            output[n * d->c + c] = (int8_t)mt_rounding_divide_s32(sum, count);
        }
    }
    return MT_OK;
}
