/*
 * Max pooling that keeps the argmax for the backward pass (Python twin: fqt_kernels.maxpool_fwd):
 * the first maximum in (i, j) tap order wins, its tap index i * kw + j is stored as uint8.
 * Helium (MVE) twin of train/fqt/mt_maxpool_fwd_s8_argmax.c, bit-exact with it, any channel count:
 * sixteen channels per vector (the last vector predicated); per tap one VCMP.S8 GT marks the lanes
 * whose value beats the running maximum strictly (ties keep the earlier tap), one VMAX updates the
 * maximum and one VPSEL by the mark the tap index. Without MVE the reference body runs.
 */
#include "mt_fqt.h"
#include "mt_maxpool_ref.h"
#include "mt_mve.h"

#if MT_MVE
/* The window at px (its taps (i * w + j) * c bytes apart) of n <= 16 channels into out and arg. */
MT_INLINE void pool_window(const int8_t *px, int32_t kh, int32_t kw, int32_t row, int32_t c, mve_pred16_t n,
                           int8_t *out, uint8_t *arg)
{
    int8x16_t best = vldrbq_z_s8(px, n);
    uint8x16_t idx = vdupq_n_u8(0);
    int32_t i, j;
    for (i = 0; i < kh; ++i) {
        for (j = i == 0 ? 1 : 0; j < kw; ++j) {
            const int8x16_t v = vldrbq_z_s8(px + i * row + j * c, n);
            idx = vpselq_u8(vdupq_n_u8((uint8_t)(i * kw + j)), idx, vcmpgtq_s8(v, best));
            best = vmaxq_s8(best, v);
        }
    }
    vstrbq_p_s8(out, best, n);
    vstrbq_p_u8(arg, idx, n);
}

/* One output row (wo pixels, `step` input bytes apart) of every channel; out of line, so a profile
   names the path. */
static MT_NOINLINE void pool_row_mve(const int8_t *px, int32_t wo, int32_t step, int32_t kh, int32_t kw, int32_t row,
                                     int32_t c, int8_t *out, uint8_t *arg)
{
    int32_t x, ch;
    for (x = 0; x < wo; ++x, px += step, out += c, arg += c) {
        for (ch = 0; ch < c; ch += 16) {
            const mve_pred16_t n = vctp8q((uint32_t)(c - ch));
            if (kh == 2 && kw == 2) { /* the common window, its tap loop unrolled */
                pool_window(px + ch, 2, 2, row, c, n, out + ch, arg + ch);
            } else {
                pool_window(px + ch, kh, kw, row, c, n, out + ch, arg + ch);
            }
        }
    }
}
#endif /* MT_MVE */

mt_status mt_maxpool_fwd_s8_argmax(const mt_pool_params *params,
                                   const mt_dims *input_dims,
                                   const int8_t *input,
                                   const mt_dims *output_dims,
                                   int8_t *output,
                                   uint8_t *argmax)
{
    if (!params || !input || !output || !argmax || params->kernel_h * params->kernel_w > 256) {
        return MT_ERR_ARG;
    }
#if MT_MVE
    {
        const int32_t h = input_dims->h, w = input_dims->w, c = input_dims->c;
        const int32_t ho = output_dims->h, wo = output_dims->w;
        const int32_t kh = params->kernel_h, kw = params->kernel_w;
        int32_t b, y;
        for (b = 0; b < input_dims->n; ++b) {
            for (y = 0; y < ho; ++y) {
                const int32_t out = (b * ho + y) * wo * c;
                pool_row_mve(input + (b * h + y * params->stride_h) * w * c, wo, params->stride_w * c, kh, kw, w * c,
                             c, output + out, argmax + out);
            }
        }
        return MT_OK;
    }
#endif /* MT_MVE */
    mt_maxpool_fwd_argmax_ref(params, input_dims, input, output_dims, output, argmax, MT_POOL_S8);
    return MT_OK;
}
