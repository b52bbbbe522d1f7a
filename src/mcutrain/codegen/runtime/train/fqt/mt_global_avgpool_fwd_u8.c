/*
 * uint8 global average pool (Python twin: the GLOBAL_AVGPOOL branch of fqt.FQT._forward on uint8):
 * per channel round_half_away(sum over H and W / (H * W)), the zero point kept (the output shares
 * the input's qparams).
 */
#include "mt_fixedpoint.h"
#include "mt_fqt.h"

mt_status mt_global_avgpool_fwd_u8(const mt_dims *input_dims, const uint8_t *input, uint8_t *output)
{
    const mt_dims *d = input_dims;
    int32_t n, c, i, count;
    if (!d || !input || !output || d->n < 1 || d->h < 1 || d->w < 1 || d->c < 1 || d->h * d->w >= (1 << 23)) {
        return MT_ERR_ARG;
    }
    count = d->h * d->w;
    for (n = 0; n < d->n; n++) {
        const uint8_t *x = input + n * count * d->c;
        for (c = 0; c < d->c; c++) {
            int32_t sum = 0; /* sum <= H * W * 255 < 2^31 */
            for (i = 0; i < count; i++) {
                sum += x[i * d->c + c];
            }
            output[n * d->c + c] = (uint8_t)mt_rounding_divide_s32(sum, count);
        }
    }
    return MT_OK;
}
