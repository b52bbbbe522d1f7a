/*
 * mcutrain runtime: mt_avgpool_fwd_s8 (see mt_nn.h): round_half_away(window sum / count).
 */
#include "mt_fixedpoint.h"
#include "mt_nn.h"

mt_status mt_avgpool_fwd_s8(const mt_pool_params *params,
                            const mt_dims *input_dims,
                            const int8_t *input,
                            const mt_dims *output_dims,
                            int8_t *output)
{
    const mt_pool_params *p = params;
    const mt_dims *in_d = input_dims;
    const mt_dims *out_d = output_dims;
    int32_t n, oy, ox, c, ky, kx, count;
    if (!p || !in_d || !input || !out_d || !output || p->kernel_h < 1 || p->kernel_w < 1 || p->stride_h < 1 ||
        p->stride_w < 1 || out_d->c != in_d->c || out_d->n != in_d->n ||
        (out_d->h - 1) * p->stride_h + p->kernel_h > in_d->h || (out_d->w - 1) * p->stride_w + p->kernel_w > in_d->w) {
        return MT_ERR_ARG;
    }
    count = p->kernel_h * p->kernel_w;
    for (n = 0; n < in_d->n; n++) {
        for (oy = 0; oy < out_d->h; oy++) {
            for (ox = 0; ox < out_d->w; ox++) {
                const int8_t *x0 = input + ((n * in_d->h + oy * p->stride_h) * in_d->w + ox * p->stride_w) * in_d->c;
                int8_t *y = output + ((n * out_d->h + oy) * out_d->w + ox) * out_d->c;
                for (c = 0; c < in_d->c; c++) {
                    int32_t sum = 0; /* |sum| <= count * 128 */
                    for (ky = 0; ky < p->kernel_h; ky++) {
                        for (kx = 0; kx < p->kernel_w; kx++) {
                            sum += x0[(ky * in_d->w + kx) * in_d->c + c];
                        }
                    }
                    /* the mean of int8 values is an int8 value: no clamp needed */
                    y[c] = (int8_t)mt_rounding_divide_s32(sum, count);
                }
            }
        }
    }
    return MT_OK;
}
