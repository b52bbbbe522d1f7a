/*
 * ReLU / ReLU6 mask of int8 errors (Python twin: fqt.FQT._mask): keep where lo < y (and y < hi).
 * DSP twin of train/fqt/mt_relu_bwd_s8.c, bit-exact with it; the reference body
 * (mt_relu_bwd_s8_ref.h) does the tail, the cases below and every element on a core without DSP.
 * DSP path: four elements per word; SSUB8 of y against lo + 1 sets the GE flag of every byte with
 * y >= lo + 1, i.e. lo < y (signed bytes), and SEL keeps those errors, zero elsewhere; ReLU6 masks
 * once more with hi - 1 >= y. 7 instructions per four elements instead of about 9 per element.
 */
#include "mt_arch.h"
#include "mt_fqt.h"
#include "mt_relu_bwd_s8_ref.h"

#if MT_DSP
/* Bytes of a where a >= b (signed), else the bytes of c: SSUB8 then SEL. */
MT_INLINE int32_t sel_ge_s8x4(int32_t a, int32_t b, int32_t keep, int32_t other)
{
#if defined(MT_DSP_NATIVE)
    int32_t d, r;
    __asm__("ssub8 %[d], %[a], %[b]\n\tsel %[r], %[k], %[o]"
            : [d] "=&r"(d), [r] "=r"(r)
            : [a] "r"(a), [b] "r"(b), [k] "r"(keep), [o] "r"(other)
            : "cc");
    (void)d;
    return r;
#else  /* !MT_DSP_NATIVE: portable emulation */
    uint32_t r = 0;
    int k;
    for (k = 0; k < 4; ++k) {
        const int32_t v = mt_byte(a, k) >= mt_byte(b, k) ? keep : other;
        r |= ((uint32_t)v >> (8 * k) & 0xFFu) << (8 * k);
    }
    return (int32_t)r;
#endif /* MT_DSP_NATIVE */
}
#endif /* MT_DSP */

mt_status mt_relu_bwd_s8(int32_t size, int32_t lo, int32_t hi, const int8_t *y, const int8_t *e_in,
                         int8_t *e_out)
{
    int32_t i = 0;
    if (!y || !e_in || !e_out || size < 0) {
        return MT_ERR_ARG;
    }
#if MT_DSP
    if (lo >= -128 && lo < 127 && hi >= -127) {
        const int32_t lo1 = (int32_t)(((uint32_t)(lo + 1) & 0xFFu) * 0x01010101u);
        const int32_t hi1 = (int32_t)(((uint32_t)(hi - 1) & 0xFFu) * 0x01010101u);
        if (hi > 127) {
            for (; i + 4 <= size; i += 4) {
                mt_write_s8x4(e_out + i, sel_ge_s8x4(mt_read_s8x4(y + i), lo1, mt_read_s8x4(e_in + i), 0));
            }
        } else {
            for (; i + 4 <= size; i += 4) {
                const int32_t yv = mt_read_s8x4(y + i);
                const int32_t v = sel_ge_s8x4(yv, lo1, mt_read_s8x4(e_in + i), 0);
                mt_write_s8x4(e_out + i, sel_ge_s8x4(hi1, yv, v, 0));
            }
        }
    }
#endif /* MT_DSP */
    mt_relu_bwd_s8_ref(i, size, lo, hi, y, e_in, e_out);
    return MT_OK;
}
