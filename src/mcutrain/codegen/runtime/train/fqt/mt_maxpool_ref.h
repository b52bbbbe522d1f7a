/*
 * The reference loops of the FQT max-pool kernels (mt_maxpool_fwd_{s8,u8,f32}_argmax and
 * mt_maxpool_bwd_{s8,u8,f32}), always inline: each kernel file instantiates them for its dtype
 * with a constant `kind`, so the compiler folds the dtype branches away and every precision
 * shares one definition of which tap wins and where an error goes (Python twins:
 * fqt_kernels.maxpool_fwd / maxpool_bwd). The DSP paths of the int8 kernels stay in their files.
 */
#ifndef MT_MAXPOOL_REF_H
#define MT_MAXPOOL_REF_H

#include <stdint.h>

#include "mt_arch.h"
#include "mt_types.h"

/* The element type of a max-pool kernel: the `kind` argument below, a constant at every call. */
#define MT_POOL_S8 0
#define MT_POOL_U8 1
#define MT_POOL_F32 2

/*
 * Max pooling with the first maximum's tap in (i, j) order (a later tap wins only if strictly
 * greater), its index i * kw + j stored as uint8 where argmax is not NULL.
 *   input in: [N, H, W, C] of `kind`;  output out: [N, Ho, Wo, C] of `kind`;  argmax out: [N, Ho, Wo, C]
 */
MT_INLINE void mt_maxpool_fwd_argmax_ref(const mt_pool_params *params,
                                         const mt_dims *input_dims,
                                         const void *input,
                                         const mt_dims *output_dims,
                                         void *output,
                                         uint8_t *argmax,
                                         int32_t kind)
{
    const int32_t h = input_dims->h, w = input_dims->w, c = input_dims->c;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    int32_t b, y, x, ch;
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                const int32_t out = ((b * ho + y) * wo + x) * c;
                for (ch = 0; ch < c; ++ch) {
                    /* below every value of the dtype, so tap (0, 0) always wins first (float: by test) */
                    int32_t best = kind == MT_POOL_S8 ? -129 : -1;
                    float best_f = 0.0f;
                    int32_t arg = 0, i, j;
                    for (i = 0; i < params->kernel_h; ++i) {
                        for (j = 0; j < params->kernel_w; ++j) {
                            const int32_t iy = y * params->stride_h + i, ix = x * params->stride_w + j;
                            const int32_t at = ((b * h + iy) * w + ix) * c + ch;
                            if (kind == MT_POOL_F32) {
                                const float v = ((const float *)input)[at];
                                if ((i == 0 && j == 0) || v > best_f) {
                                    best_f = v;
                                    arg = i * params->kernel_w + j;
                                }
                            } else {
                                const int32_t v = kind == MT_POOL_S8 ? (int32_t)((const int8_t *)input)[at]
                                                                     : (int32_t)((const uint8_t *)input)[at];
                                if (v > best) {
                                    best = v;
                                    arg = i * params->kernel_w + j;
                                }
                            }
                        }
                    }
                    if (kind == MT_POOL_F32) {
                        ((float *)output)[out + ch] = best_f;
                    } else {
                        ((uint8_t *)output)[out + ch] = (uint8_t)best; /* int8 and uint8: the same byte */
                    }
                    if (argmax) {
                        argmax[out + ch] = (uint8_t)arg;
                    }
                }
            }
        }
    }
}

/*
 * Max-pool backward for tiling windows (stride == kernel): each window's error goes to its argmax
 * tap. The caller fills e_x first with the dtype's zero error (0, or z_e of uint8 errors): a tap
 * that is no window's maximum keeps it.
 *   argmax in: [N, Ho, Wo, C];  e_y in: [N, Ho, Wo, C] of `kind`;  e_x in/out: [N, H, W, C] of `kind`
 */
MT_INLINE void mt_maxpool_bwd_route_ref(const mt_pool_params *params,
                                        const mt_dims *input_dims,
                                        const mt_dims *output_dims,
                                        const uint8_t *argmax,
                                        const void *e_y,
                                        void *e_x,
                                        int32_t kind)
{
    const int32_t h = input_dims->h, w = input_dims->w, c = input_dims->c;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    int32_t b, y, x, ch;
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                const int32_t out = ((b * ho + y) * wo + x) * c;
                for (ch = 0; ch < c; ++ch) {
                    const int32_t t = argmax[out + ch];
                    const int32_t iy = y * params->stride_h + t / params->kernel_w;
                    const int32_t ix = x * params->stride_w + t % params->kernel_w;
                    const int32_t at = ((b * h + iy) * w + ix) * c + ch;
                    if (kind == MT_POOL_F32) {
                        ((float *)e_x)[at] = ((const float *)e_y)[out + ch];
                    } else {
                        ((uint8_t *)e_x)[at] = ((const uint8_t *)e_y)[out + ch]; /* int8 too: a byte copy */
                    }
                }
            }
        }
    }
}

#endif /* MT_MAXPOOL_REF_H */
