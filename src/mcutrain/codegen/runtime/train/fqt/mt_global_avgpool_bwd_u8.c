/*
 * Global average-pool backward of uint8 errors (Python twin: fqt.FQTBackward._bwd_node,
 * GLOBAL_AVGPOOL, precision uint8): every position of channel c gets
 * z_e + round_half_away((e_y[c] - z_e) / (H * W)) (mt_rounding_divide_s32); the input's error
 * keeps the output's range, and |share| <= |e_y - z_e| keeps it inside 0..255.
 * e_x [N, H, W, C] is overwritten; e_y is [N, C].
 */
#include "mt_fixedpoint.h"
#include "mt_fqt.h"

mt_status mt_global_avgpool_bwd_u8(const mt_dims *input_dims, int32_t e_zero_point, const uint8_t *e_y,
                                   uint8_t *e_x)
{
    const mt_dims *d = input_dims;
    int32_t n, c, i, count;
    if (!d || !e_y || !e_x || d->h < 1 || d->w < 1 || d->c < 1 || e_zero_point < 0 || e_zero_point > 255) {
        return MT_ERR_ARG;
    }
    count = d->h * d->w;
    for (n = 0; n < d->n; n++) {
        uint8_t *first = e_x + n * count * d->c;
        for (c = 0; c < d->c; c++) { /* the first position, then copies of it */
            const int32_t ec = (int32_t)e_y[n * d->c + c] - e_zero_point;
            first[c] = (uint8_t)(e_zero_point + mt_rounding_divide_s32(ec, count));
        }
        for (i = 1; i < count; i++) {
            uint8_t *ex = first + i * d->c;
            for (c = 0; c < d->c; c++) {
                ex[c] = first[c];
            }
        }
    }
    return MT_OK;
}
