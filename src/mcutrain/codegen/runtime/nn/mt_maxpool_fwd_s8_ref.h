/*
 * What both mt_maxpool_fwd_s8 files share (nn/mt_maxpool_fwd_s8.c, the reference, and
 * dsp/mt_maxpool_fwd_s8.c, its DSP twin), always inline: the argument check and the reference
 * maximum of one output pixel's channels, which the twin runs for the channels its four-channel
 * words leave, so both builds share one definition of the result.
 */
#ifndef MT_MAXPOOL_FWD_S8_REF_H
#define MT_MAXPOOL_FWD_S8_REF_H

#include "mt_arch.h"
#include "mt_nn.h"

/* MT_ERR_ARG unless mt_maxpool_fwd_s8's arguments are valid (every window inside the input). */
MT_INLINE mt_status mt_maxpool_fwd_s8_check(const mt_pool_params *p,
                                            const mt_dims *in_d,
                                            const int8_t *input,
                                            const mt_dims *out_d,
                                            const int8_t *output)
{
    if (!p || !in_d || !input || !out_d || !output || p->kernel_h < 1 || p->kernel_w < 1 ||
        p->stride_h < 1 || p->stride_w < 1 || out_d->c != in_d->c || out_d->n != in_d->n ||
        (out_d->h - 1) * p->stride_h + p->kernel_h > in_d->h ||
        (out_d->w - 1) * p->stride_w + p->kernel_w > in_d->w) {
        return MT_ERR_ARG;
    }
    return MT_OK;
}

/* y[c] = the window's maximum of channel c, for from <= c < C; x0: the window's first tap. */
MT_INLINE void mt_maxpool_fwd_s8_pixel_ref(const mt_pool_params *p,
                                           const mt_dims *in_d,
                                           const int8_t *x0,
                                           int8_t *y,
                                           int32_t from)
{
    int32_t c, ky, kx;
    for (c = from; c < in_d->c; c++) {
        int8_t m = x0[c];
        for (ky = 0; ky < p->kernel_h; ky++) {
            for (kx = 0; kx < p->kernel_w; kx++) {
                const int8_t v = x0[(ky * in_d->w + kx) * in_d->c + c];
                m = v > m ? v : m;
            }
        }
        y[c] = m;
    }
}

#endif /* MT_MAXPOOL_FWD_S8_REF_H */
