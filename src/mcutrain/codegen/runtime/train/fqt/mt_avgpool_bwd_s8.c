/*
 * Average-pool backward of int8 errors for windows that do not overlap (stride >= kernel; Python
 * twin: fqt.FQTBackward._bwd_node, AVGPOOL): each window's error divided by the window count
 * (round half away, mt_rounding_divide_s32) goes to every input of the window; inputs no window
 * covers get 0. |share| <= 127, so e_x stays int8. e_x is overwritten.
 */
#include <string.h>

#include "mt_fixedpoint.h"
#include "mt_fqt.h"

mt_status mt_avgpool_bwd_s8(const mt_pool_params *params,
                            const mt_dims *input_dims,
                            const mt_dims *output_dims,
                            const int8_t *e_y,
                            int8_t *e_x)
{
    const mt_pool_params *p = params;
    int32_t n, oy, ox, ky, kx, c, count;
    if (!p || !input_dims || !output_dims || !e_y || !e_x || p->kernel_h < 1 || p->kernel_w < 1 ||
        p->stride_h < p->kernel_h || p->stride_w < p->kernel_w || output_dims->c != input_dims->c) {
        return MT_ERR_ARG;
    }
    count = p->kernel_h * p->kernel_w;
    memset(e_x, 0, (size_t)(input_dims->n * input_dims->h * input_dims->w * input_dims->c));
    for (n = 0; n < input_dims->n; n++) {
        for (oy = 0; oy < output_dims->h; oy++) {
            for (ox = 0; ox < output_dims->w; ox++) {
                const int8_t *ey = e_y + ((n * output_dims->h + oy) * output_dims->w + ox) * output_dims->c;
                for (ky = 0; ky < p->kernel_h; ky++) {
                    for (kx = 0; kx < p->kernel_w; kx++) {
                        int8_t *ex = e_x + ((n * input_dims->h + oy * p->stride_h + ky) * input_dims->w +
                                            ox * p->stride_w + kx) * input_dims->c;
                        for (c = 0; c < input_dims->c; c++) {
                            ex[c] = (int8_t)mt_rounding_divide_s32(ey[c], count);
                        }
                    }
                }
            }
        }
    }
    return MT_OK;
}
