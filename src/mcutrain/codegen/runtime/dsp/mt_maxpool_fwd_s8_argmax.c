/*
 * Max pooling that keeps the argmax for the backward pass (Python twin: fqt_kernels.maxpool_fwd):
 * the first maximum in (i, j) tap order wins, its tap index i * kw + j is stored as uint8.
 * DSP twin of train/fqt/mt_maxpool_fwd_s8_argmax.c, bit-exact with it; the reference body
 * (mt_maxpool_ref.h) runs where the channels are not a multiple of 4, and on a core without DSP.
 * DSP path (channels a multiple of 4): four channels per word; per tap one SSUB8 sets the GE flag of
 * each byte where the running maximum is >= the tap's value (ties keep the earlier tap), and two SEL
 * by those flags update the maximum and its tap index (the word t * 0x01010101).
 */
#include "mt_arch.h"
#include "mt_fqt.h"
#include "mt_maxpool_ref.h"

#if MT_DSP
/* (max, arg) <- bytewise (best >= v ? (best, arg) : (v, t)), signed bytes. */
MT_INLINE void max_arg_s8x4(int32_t *best, int32_t *arg, int32_t v, int32_t t)
{
#if defined(MT_DSP_NATIVE)
    int32_t d;
    __asm__("ssub8 %[d], %[b], %[v]\n\t"
            "sel   %[b], %[b], %[v]\n\t"
            "sel   %[a], %[a], %[t]"
            : [d] "=&r"(d), [b] "+r"(*best), [a] "+r"(*arg)
            : [v] "r"(v), [t] "r"(t)
            : "cc");
    (void)d;
#else  /* !defined(MT_DSP_NATIVE) */
    uint32_t rb = 0, ra = 0;
    int k;
    for (k = 0; k < 4; ++k) {
        const int32_t bk = mt_byte(*best, k), vk = mt_byte(v, k);
        const uint32_t keep = bk >= vk;
        rb |= ((uint32_t)(keep ? bk : vk) & 0xFFu) << (8 * k);
        ra |= ((keep ? (uint32_t)*arg : (uint32_t)t) >> (8 * k) & 0xFFu) << (8 * k);
    }
    *best = (int32_t)rb;
    *arg = (int32_t)ra;
#endif /* MT_DSP_NATIVE */
}
#endif /* MT_DSP */

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
#if MT_DSP
    if ((input_dims->c & 3) == 0) {
        const int32_t h = input_dims->h, w = input_dims->w, c = input_dims->c;
        const int32_t ho = output_dims->h, wo = output_dims->w;
        int32_t b, y, x, ch;
        const int32_t kh = params->kernel_h, kw = params->kernel_w;
        for (b = 0; b < input_dims->n; ++b) {
            for (y = 0; y < ho; ++y) {
                for (x = 0; x < wo; ++x) {
                    const int32_t out = ((b * ho + y) * wo + x) * c;
                    const int8_t *px = input + ((b * h + y * params->stride_h) * w + x * params->stride_w) * c;
                    for (ch = 0; ch < c; ch += 4) {
                        int32_t best = mt_read_s8x4(px + ch), arg = 0;
                        int32_t i, j;
                        if (kh == 2 && kw == 2) { /* the common window: 3 SSUB8, 6 SEL per four channels */
                            max_arg_s8x4(&best, &arg, mt_read_s8x4(px + c + ch), 0x01010101);
                            max_arg_s8x4(&best, &arg, mt_read_s8x4(px + w * c + ch), 0x02020202);
                            max_arg_s8x4(&best, &arg, mt_read_s8x4(px + (w + 1) * c + ch), 0x03030303);
                            mt_write_s8x4(output + out + ch, best);
                            mt_write_s8x4((int8_t *)(void *)(argmax + out + ch), arg);
                            continue;
                        }
                        for (i = 0; i < kh; ++i) {
                            for (j = i == 0 ? 1 : 0; j < kw; ++j) {
                                const int32_t t = i * kw + j;
                                max_arg_s8x4(&best, &arg, mt_read_s8x4(px + (i * w + j) * c + ch),
                                             (int32_t)((uint32_t)t * 0x01010101u));
                            }
                        }
                        mt_write_s8x4(output + out + ch, best);
                        mt_write_s8x4((int8_t *)(void *)(argmax + out + ch), arg);
                    }
                }
            }
        }
        return MT_OK;
    }
#endif /* MT_DSP */
    mt_maxpool_fwd_argmax_ref(params, input_dims, input, output_dims, output, argmax, MT_POOL_S8);
    return MT_OK;
}
