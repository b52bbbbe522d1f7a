/*
 * Global average-pool backward of int8 errors (Python twin: fqt.FQTBackward._bwd_node,
 * GLOBAL_AVGPOOL): every position of channel c gets round_half_away(e_y[c] / (H * W))
 * (mt_rounding_divide_s32). e_x [N, H, W, C] is overwritten; e_y is [N, C].
 */
#include "mt_fixedpoint.h"
#include "mt_fqt.h"

mt_status mt_global_avgpool_bwd_s8(const mt_dims *input_dims, const int8_t *e_y, int8_t *e_x)
{
    const mt_dims *d = input_dims;
    int32_t n, c, i, count;
    if (!d || !e_y || !e_x || d->h < 1 || d->w < 1 || d->c < 1) {
        return MT_ERR_ARG;
    }
    count = d->h * d->w;
    for (n = 0; n < d->n; n++) {
        int8_t *first = e_x + n * count * d->c;
        for (c = 0; c < d->c; c++) { /* the first position, then copies of it */
            first[c] = (int8_t)mt_rounding_divide_s32(e_y[n * d->c + c], count);
        }
        for (i = 1; i < count; i++) {
            int8_t *ex = first + i * d->c;
            for (c = 0; c < d->c; c++) {
                ex[c] = first[c];
            }
        }
    }
    return MT_OK;
}
