/*
 * mcutrain runtime: mt_maxpool_fwd_s8 (see mt_nn.h). Max commutes with the (shared) qparams,
 * so the int8 values are compared directly. The DSP path takes four channels per word
 * (SSUB8 + SEL); channels past the last multiple of four take the plain loop.
 */
#include "mt_arch.h"
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
    int32_t n, oy, ox, c, ky, kx;
    if (!p || !in_d || !input || !out_d || !output || p->kernel_h < 1 || p->kernel_w < 1 || p->stride_h < 1 ||
        p->stride_w < 1 || out_d->c != in_d->c || out_d->n != in_d->n ||
        (out_d->h - 1) * p->stride_h + p->kernel_h > in_d->h || (out_d->w - 1) * p->stride_w + p->kernel_w > in_d->w) {
        return MT_ERR_ARG;
    }
    for (n = 0; n < in_d->n; n++) {
        for (oy = 0; oy < out_d->h; oy++) {
            for (ox = 0; ox < out_d->w; ox++) {
                const int8_t *x0 = input + ((n * in_d->h + oy * p->stride_h) * in_d->w + ox * p->stride_w) * in_d->c;
                int8_t *y = output + ((n * out_d->h + oy) * out_d->w + ox) * out_d->c;
                c = 0;
#if MT_DSP
                if (p->kernel_h == 2 && p->kernel_w == 2) {
                    /* the common 2x2 window unrolled: 4 loads, 3 maxima, 1 store per four channels */
                    const int32_t dx = in_d->c;
                    const int32_t dy = in_d->w * in_d->c;
                    for (; c + 4 <= in_d->c; c += 4) {
                        const int8_t *a = x0 + c;
                        const int32_t top = mt_max_s8x4(mt_read_s8x4(a), mt_read_s8x4(a + dx));
                        const int32_t bottom = mt_max_s8x4(mt_read_s8x4(a + dy), mt_read_s8x4(a + dy + dx));
                        mt_write_s8x4(y + c, mt_max_s8x4(top, bottom));
                    }
                }
                for (; c + 4 <= in_d->c; c += 4) {
                    int32_t m4 = mt_read_s8x4(x0 + c);
                    for (ky = 0; ky < p->kernel_h; ky++) {
                        for (kx = 0; kx < p->kernel_w; kx++) {
                            m4 = mt_max_s8x4(m4, mt_read_s8x4(x0 + (ky * in_d->w + kx) * in_d->c + c));
                        }
                    }
                    mt_write_s8x4(y + c, m4);
                }
#endif /* MT_DSP */
                for (; c < in_d->c; c++) {
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
        }
    }
    return MT_OK;
}
