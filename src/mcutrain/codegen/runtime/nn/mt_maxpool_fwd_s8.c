/*
 * mcutrain runtime: mt_maxpool_fwd_s8 (see mt_nn.h). Max commutes with the (shared) qparams,
 * so the int8 values are compared directly.
 *
 * Reference kernel (mt_maxpool_fwd_s8_ref.h); dsp/mt_maxpool_fwd_s8.c is its DSP twin.
 */
#include "mt_maxpool_fwd_s8_ref.h"
#include "mt_nn.h"

mt_status mt_maxpool_fwd_s8(const mt_pool_params *params,
                            const mt_dims *input_dims,
                            const int8_t *input,
                            const mt_dims *output_dims,
                            int8_t *output)
{
    const mt_pool_params *p = params;
    const mt_dims *in_d = input_dims;
    const mt_dims *out_d = output_dims;
    int32_t n, oy, ox;
    if (mt_maxpool_fwd_s8_check(p, in_d, input, out_d, output) != MT_OK) {
        return MT_ERR_ARG;
    }
    for (n = 0; n < in_d->n; n++) {
        for (oy = 0; oy < out_d->h; oy++) {
            for (ox = 0; ox < out_d->w; ox++) {
                const int8_t *x0 = input + ((n * in_d->h + oy * p->stride_h) * in_d->w + ox * p->stride_w) * in_d->c;
                int8_t *y = output + ((n * out_d->h + oy) * out_d->w + ox) * out_d->c;
                mt_maxpool_fwd_s8_pixel_ref(p, in_d, x0, y, 0);
            }
        }
    }
    return MT_OK;
}
