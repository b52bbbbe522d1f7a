/*
 * mcutrain runtime: mt_maxpool_fwd_s8 (see mt_nn.h), the ARMv6-M (Cortex-M0+) twin of
 * nn/mt_maxpool_fwd_s8.c, bit-exact with it (max commutes with the shared qparams, so the int8
 * values are compared directly).
 *
 * Why: the reference recomputes (ky * W + kx) * C + c per compared byte, which costs a
 * multiply-heavy address per byte on a core without a multiply-accumulate; here the first tap
 * is copied and each further tap is one running pointer over the C channels of the pixel; a 2x2
 * window compares its four taps in one pass.
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
    const int32_t ch = in_d->c;
    const int32_t xrow = in_d->w * ch;
    int8_t *y = output;
    int32_t n, oy, ox, ky, kx, c;
    if (mt_maxpool_fwd_s8_check(p, in_d, input, out_d, output) != MT_OK) {
        return MT_ERR_ARG;
    }
    for (n = 0; n < in_d->n; n++) {
        for (oy = 0; oy < out_d->h; oy++) {
            const int8_t *row = input + (n * in_d->h + oy * p->stride_h) * xrow;
            for (ox = 0; ox < out_d->w; ox++) {
                const int8_t *x0 = row + ox * p->stride_w * ch;
                if (p->kernel_h == 2 && p->kernel_w == 2) {
                    /* the common window: its four taps side by side, one pass over the channels */
                    const int8_t *x1 = x0 + ch;
                    const int8_t *x2 = x0 + xrow;
                    const int8_t *x3 = x2 + ch;
                    for (c = 0; c < ch; c++) {
                        const int8_t a = x0[c] > x1[c] ? x0[c] : x1[c];
                        const int8_t b = x2[c] > x3[c] ? x2[c] : x3[c];
                        y[c] = a > b ? a : b;
                    }
                    y += ch;
                    continue;
                }
                for (c = 0; c < ch; c++) {
                    y[c] = x0[c];
                }
                for (ky = 0; ky < p->kernel_h; ky++) {
                    for (kx = ky == 0 ? 1 : 0; kx < p->kernel_w; kx++) {
                        const int8_t *x = x0 + ky * xrow + kx * ch;
                        for (c = 0; c < ch; c++) {
                            const int8_t v = x[c];
                            y[c] = v > y[c] ? v : y[c];
                        }
                    }
                }
                y += ch;
            }
        }
    }
    return MT_OK;
}
