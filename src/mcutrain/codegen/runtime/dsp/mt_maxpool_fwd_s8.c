/*
 * mcutrain runtime: mt_maxpool_fwd_s8 (see mt_nn.h). Max commutes with the (shared) qparams,
 * so the int8 values are compared directly.
 *
 * DSP twin of nn/mt_maxpool_fwd_s8.c, bit-exact with it: four channels per word (SSUB8 + SEL);
 * channels past the last multiple of four, and every channel on a core without DSP, take the
 * reference loop (mt_maxpool_fwd_s8_ref.h).
 */
#include "mt_arch.h"
#include "mt_maxpool_fwd_s8_ref.h"
#include "mt_nn.h"

#if MT_DSP

/*
 * The common 2x2 window over a multiple of four channels: four loads, three maxima (SSUB8 + SEL)
 * and one store per four channels, pointers stepped rather than recomputed per pixel.
 */
static void pool2x2(const mt_pool_params *p,
                    const mt_dims *in_d,
                    const int8_t *input,
                    const mt_dims *out_d,
                    int8_t *output)
{
    const int32_t c4 = in_d->c >> 2;
    const int32_t dx = in_d->c;
    const int32_t dy = in_d->w * in_d->c;
    const int32_t step_x = p->stride_w * in_d->c;
    int8_t *y = output;
    int32_t n, oy, ox, c;
    for (n = 0; n < in_d->n; n++) {
        for (oy = 0; oy < out_d->h; oy++) {
            const int8_t *row = input + (n * in_d->h + oy * p->stride_h) * dy;
            for (ox = 0; ox < out_d->w; ox++) {
                const int8_t *a = row;
                const int8_t *b = row + dy;
#if defined(MT_DSP_NATIVE)
                /* 4 LDR, 3 x (SSUB8 + SEL), STR and the loop: 13 instructions per four channels */
                int32_t t0, t1, t2, t3, ge;
                c = c4;
                __asm__ volatile("1:\n\t"
                                 "ldr   %[t0], [%[a], %[dx]]\n\t"
                                 "ldr   %[t1], [%[a]], #4\n\t"
                                 "ldr   %[t2], [%[b], %[dx]]\n\t"
                                 "ldr   %[t3], [%[b]], #4\n\t"
                                 "ssub8 %[ge], %[t1], %[t0]\n\t"
                                 "sel   %[t1], %[t1], %[t0]\n\t"
                                 "ssub8 %[ge], %[t3], %[t2]\n\t"
                                 "sel   %[t3], %[t3], %[t2]\n\t"
                                 "ssub8 %[ge], %[t1], %[t3]\n\t"
                                 "sel   %[t1], %[t1], %[t3]\n\t"
                                 "str   %[t1], [%[y]], #4\n\t"
                                 "subs  %[c], %[c], #1\n\t"
                                 "bne   1b\n\t"
                                 : [a] "+r"(a), [b] "+r"(b), [y] "+r"(y), [c] "+r"(c), [t0] "=&r"(t0),
                                   [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [ge] "=&r"(ge)
                                 : [dx] "r"(dx)
                                 : "cc", "memory");
#else  /* !MT_DSP_NATIVE */
                for (c = c4; c > 0; c--) {
                    const int32_t top = mt_max_s8x4(mt_read_s8x4(a), mt_read_s8x4(a + dx));
                    const int32_t bottom = mt_max_s8x4(mt_read_s8x4(b), mt_read_s8x4(b + dx));
                    mt_write_s8x4(y, mt_max_s8x4(top, bottom));
                    a += 4;
                    b += 4;
                    y += 4;
                }
#endif /* MT_DSP_NATIVE */
                row += step_x;
            }
        }
    }
}

#endif /* MT_DSP */

mt_status mt_maxpool_fwd_s8(const mt_pool_params *params,
                            const mt_dims *input_dims,
                            const int8_t *input,
                            const mt_dims *output_dims,
                            int8_t *output)
{
    const mt_pool_params *p = params;
    const mt_dims *in_d = input_dims;
    const mt_dims *out_d = output_dims;
    int32_t n, oy, ox, c;
    if (mt_maxpool_fwd_s8_check(p, in_d, input, out_d, output) != MT_OK) {
        return MT_ERR_ARG;
    }
#if MT_DSP
    if (p->kernel_h == 2 && p->kernel_w == 2 && in_d->c % 4 == 0) {
        pool2x2(p, in_d, input, out_d, output);
        return MT_OK;
    }
#endif /* MT_DSP */
    for (n = 0; n < in_d->n; n++) {
        for (oy = 0; oy < out_d->h; oy++) {
            for (ox = 0; ox < out_d->w; ox++) {
                const int8_t *x0 = input + ((n * in_d->h + oy * p->stride_h) * in_d->w + ox * p->stride_w) * in_d->c;
                int8_t *y = output + ((n * out_d->h + oy) * out_d->w + ox) * out_d->c;
                c = 0;
#if MT_DSP
                int32_t ky, kx;
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
                mt_maxpool_fwd_s8_pixel_ref(p, in_d, x0, y, c);
            }
        }
    }
    return MT_OK;
}
