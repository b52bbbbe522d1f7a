/*
 * Max-pool backward of int8 errors for tiling windows (Python twin: fqt_kernels.maxpool_bwd, the
 * stride == kernel path): plain stores, so no sum can leave the int8 range.
 * DSP twin of train/fqt/mt_maxpool_bwd_s8.c, bit-exact with it; the reference body
 * (mt_maxpool_ref.h) runs where the channels are not a multiple of 4, and on a core without DSP.
 * DSP path (channels a multiple of 4): every input element of a window is written once, four
 * channels per word: for tap t, the bytes whose argmax is t take the window's error, the others 0
 * (EOR with t * 0x01010101, USUB8 against 0x01010101 sets GE where the argmax differs, SEL); only
 * the input rows and columns no window covers are cleared beforehand.
 */
#include <string.h>

#include "mt_arch.h"
#include "mt_fqt.h"
#include "mt_maxpool_ref.h"

#if MT_DSP
/* Bytewise (arg == t ? e : 0) for four channels; tt = t * 0x01010101. */
MT_INLINE int32_t route_s8x4(int32_t arg, int32_t tt, int32_t e)
{
#if defined(MT_DSP_NATIVE)
    int32_t d, r;
    __asm__("usub8 %[d], %[x], %[one]\n\t"
            "sel   %[r], %[z], %[e]"
            : [d] "=&r"(d), [r] "=&r"(r)
            : [x] "r"(arg ^ tt), [one] "r"(0x01010101), [z] "r"(0), [e] "r"(e)
            : "cc");
    (void)d;
    return r;
#else  /* !defined(MT_DSP_NATIVE) */
    uint32_t r = 0;
    int k;
    for (k = 0; k < 4; ++k) {
        const uint32_t m = (((uint32_t)(arg ^ tt) >> (8 * k)) & 0xFFu) == 0 ? 0xFFu : 0u;
        r |= ((uint32_t)e & (m << (8 * k)));
    }
    return (int32_t)r;
#endif /* MT_DSP_NATIVE */
}
#endif /* MT_DSP */

mt_status mt_maxpool_bwd_s8(const mt_pool_params *params,
                            const mt_dims *input_dims,
                            const mt_dims *output_dims,
                            const uint8_t *argmax,
                            const int8_t *e_y,
                            int8_t *e_x)
{
    if (!params || !argmax || !e_y || !e_x || params->stride_h != params->kernel_h ||
        params->stride_w != params->kernel_w) {
        return MT_ERR_ARG;
    }
#if MT_DSP
    if ((input_dims->c & 3) == 0) {
        const int32_t h = input_dims->h, w = input_dims->w, c = input_dims->c;
        const int32_t ho = output_dims->h, wo = output_dims->w;
        int32_t b, y, x, ch;
        const int32_t kh = params->kernel_h, kw = params->kernel_w;
        if (ho * kh != h || wo * kw != w) { /* rows or columns past the last window: their errors are 0 */
            memset(e_x, 0, (size_t)(input_dims->n * h * w * c));
        }
        for (b = 0; b < input_dims->n; ++b) {
            for (y = 0; y < ho; ++y) {
                for (x = 0; x < wo; ++x) {
                    const int32_t out = ((b * ho + y) * wo + x) * c;
                    int8_t *px = e_x + ((b * h + y * kh) * w + x * kw) * c;
                    for (ch = 0; ch < c; ch += 4) {
                        const int32_t a = mt_read_s8x4((const int8_t *)(const void *)(argmax + out + ch));
                        const int32_t ev = mt_read_s8x4(e_y + out + ch);
                        int32_t i, j;
                        if (kh == 2 && kw == 2) { /* the common window: four routed words */
                            mt_write_s8x4(px + ch, route_s8x4(a, 0, ev));
                            mt_write_s8x4(px + c + ch, route_s8x4(a, 0x01010101, ev));
                            mt_write_s8x4(px + w * c + ch, route_s8x4(a, 0x02020202, ev));
                            mt_write_s8x4(px + (w + 1) * c + ch, route_s8x4(a, 0x03030303, ev));
                            continue;
                        }
                        for (i = 0; i < kh; ++i) {
                            for (j = 0; j < kw; ++j) {
                                const int32_t tt = (int32_t)((uint32_t)(i * kw + j) * 0x01010101u);
                                mt_write_s8x4(px + (i * w + j) * c + ch, route_s8x4(a, tt, ev));
                            }
                        }
                    }
                }
            }
        }
        return MT_OK;
    }
#endif /* MT_DSP */
    memset(e_x, 0, (size_t)(input_dims->n * input_dims->h * input_dims->w * input_dims->c));
    mt_maxpool_bwd_route_ref(params, input_dims, output_dims, argmax, e_y, e_x, MT_POOL_S8);
    return MT_OK;
}
