/*
 * Dynamic partial updates of seed A on the device (Python twins: methods.partial.keep_counts,
 * magnitudes and top_k_mask): per sample, the k structures (conv filters, linear rows) whose
 * errors have the largest sum of |e - z_e| are kept, ties to the lower index; the errors of the
 * others are set to z_e (a centred 0) in place, and the kept channels are listed so the kernels
 * that follow skip the rest. int8 errors are uint8 ones with z_e = 128 after flipping the sign bit.
 *
 * Cost, for rows x channels errors: the magnitudes walk the errors once, four channels a word
 * (DSP: |e - z| of four lanes by SSUB8/USUB8 + SEL, summed in 16-bit lanes by UXTAB16 for at most
 * 256 rows, then into int32; without DSP |e - z| is looked up in a table of the 256 byte values);
 * the selection (mt_fqt_topk_select.c) is O(channels * min(k, channels - k)); the pruned errors
 * are written a word of four channels at a time (DSP), whole pruned words without a load.
 */
#include "mt_arch.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_fqt_math.h"

#if MT_DSP
#if defined(MT_DSP_NATIVE)
/* |a - b| of four unsigned lanes: USUB8 both ways, SEL by the GE flags of a - b. */
MT_INLINE uint32_t topk_absdiff_u8x4(uint32_t a, uint32_t b)
{
    uint32_t r, t;
    __asm__("usub8 %1, %3, %2\n\tusub8 %0, %2, %3\n\tsel %0, %0, %1" : "=&r"(r), "=&r"(t) : "r"(a), "r"(b) : "cc");
    return r;
}

/* |a| of four signed lanes as unsigned bytes (|-128| = 0x80): SSUB8 from 0, SEL where a <= 0. */
MT_INLINE uint32_t topk_abs_s8x4(uint32_t a)
{
    uint32_t r;
    __asm__("ssub8 %0, %2, %1\n\tsel %0, %0, %1" : "=&r"(r) : "r"(a), "r"(0u) : "cc");
    return r;
}

MT_INLINE uint32_t topk_uxtab16(uint32_t acc, uint32_t x)
{
    uint32_t r;
    __asm__("uxtab16 %0, %1, %2" : "=r"(r) : "r"(acc), "r"(x));
    return r;
}

MT_INLINE uint32_t topk_uxtab16_ror8(uint32_t acc, uint32_t x)
{
    uint32_t r;
    __asm__("uxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(acc), "r"(x));
    return r;
}
#else  /* portable emulation (MT_EMULATE_DSP) */
MT_INLINE uint32_t topk_absdiff_u8x4(uint32_t a, uint32_t b)
{
    uint32_t r = 0;
    int s;
    for (s = 0; s < 32; s += 8) {
        const uint32_t x = (a >> s) & 0xFFu, y = (b >> s) & 0xFFu;
        r |= (x > y ? x - y : y - x) << s;
    }
    return r;
}

MT_INLINE uint32_t topk_abs_s8x4(uint32_t a)
{
    uint32_t r = 0;
    int s;
    for (s = 0; s < 32; s += 8) {
        const int32_t x = (int32_t)(int8_t)(uint8_t)((a >> s) & 0xFFu);
        r |= (uint32_t)(x < 0 ? -x : x) << s;
    }
    return r;
}

MT_INLINE uint32_t topk_uxtab16(uint32_t acc, uint32_t x)
{
    return (((acc & 0xFFFFu) + (x & 0xFFu)) & 0xFFFFu) | (((acc >> 16) + ((x >> 16) & 0xFFu)) << 16);
}

MT_INLINE uint32_t topk_uxtab16_ror8(uint32_t acc, uint32_t x)
{
    return topk_uxtab16(acc, x >> 8);
}
#endif /* MT_DSP_NATIVE */

/* Rows per pass of the 16-bit lane sums: 256 * 255 < 2^16. */
#define TOPK_ROWS 256
#else  /* !MT_DSP */
/* Errors from which a 256-entry table of |e - z| (on the stack) pays for its filling. */
#define TOPK_TABLE_MIN 1024
#endif /* MT_DSP */

/* |e - z| of one error; int8 errors are compared as e ^ 0x80 with z = 128, i.e. |e|. */
MT_INLINE int32_t topk_mag1(uint8_t e, int32_t z, int is_signed)
{
    const int32_t v = is_signed ? (int32_t)(int8_t)e : (int32_t)e - z;
    return v < 0 ? -v : v;
}

/*
 * The byte errors' top-k, one body for int8 (is_signed: magnitudes |e|, pruned errors 0) and uint8
 * (|e - z|, pruned errors z); inlined with a constant is_signed.
 */
MT_INLINE mt_status topk_bytes(int32_t rows, int32_t channels, int32_t k, int32_t z, int is_signed, uint8_t *e,
                               int32_t *list, uint8_t *mask, int32_t *kept)
{
    const uint8_t fill = (uint8_t)(is_signed ? 0 : z);
    int32_t p, c, c4 = 0;
    if (!e || !list || !mask || !kept || channels < 1 || rows < 0) {
        return MT_ERR_ARG;
    }
#if MT_DSP
    {
        const uint32_t z4 = 0x01010101u * (uint32_t)(uint8_t)z;
        for (c4 = 0; c4 + 4 <= channels; c4 += 4) { /* four channels a word, 16-bit lane sums */
            int32_t m0 = 0, m1 = 0, m2 = 0, m3 = 0, p0;
            for (p0 = 0; p0 < rows; p0 += TOPK_ROWS) {
                const int32_t n = rows - p0 < TOPK_ROWS ? rows - p0 : TOPK_ROWS;
                const uint8_t *q = e + p0 * channels + c4;
                const uint8_t *const end2 = q + (n & ~1) * channels;
                uint32_t a02 = 0, a13 = 0, w, v, a, b;
                for (; q != end2; q += 2 * channels) { /* two rows a pass */
                    memcpy(&w, q, 4);
                    memcpy(&v, q + channels, 4);
                    a = is_signed ? topk_abs_s8x4(w) : topk_absdiff_u8x4(w, z4);
                    b = is_signed ? topk_abs_s8x4(v) : topk_absdiff_u8x4(v, z4);
                    a02 = topk_uxtab16(a02, a);
                    a13 = topk_uxtab16_ror8(a13, a);
                    a02 = topk_uxtab16(a02, b);
                    a13 = topk_uxtab16_ror8(a13, b);
                }
                if (n & 1) {
                    memcpy(&w, q, 4);
                    a = is_signed ? topk_abs_s8x4(w) : topk_absdiff_u8x4(w, z4);
                    a02 = topk_uxtab16(a02, a);
                    a13 = topk_uxtab16_ror8(a13, a);
                }
                m0 += (int32_t)(a02 & 0xFFFFu);
                m2 += (int32_t)(a02 >> 16);
                m1 += (int32_t)(a13 & 0xFFFFu);
                m3 += (int32_t)(a13 >> 16);
            }
            list[c4] = m0;
            list[c4 + 1] = m1;
            list[c4 + 2] = m2;
            list[c4 + 3] = m3;
        }
    }
#else  /* !MT_DSP */
    if (rows * channels >= TOPK_TABLE_MIN) { /* |e - z| of every byte value, looked up */
        uint8_t tab[256];
        for (p = 0; p < 256; ++p) {
            tab[p] = (uint8_t)topk_mag1((uint8_t)p, z, is_signed);
        }
        for (c = 0; c < channels; ++c) {
            const uint8_t *q = e + c;
            const uint8_t *const end2 = q + (rows & ~1) * channels;
            int32_t m = 0;
            for (; q != end2; q += 2 * channels) {
                m += tab[q[0]];
                m += tab[q[channels]];
            }
            list[c] = m + ((rows & 1) ? tab[*q] : 0);
        }
        c4 = channels;
    }
#endif /* MT_DSP */
    for (c = c4; c < channels; ++c) { /* exact: |e - z| <= 255 per row, rows < 2^23 */
        const uint8_t *q = e + c;
        int32_t m = 0;
        for (p = 0; p < rows; ++p, q += channels) {
            m += topk_mag1(*q, z, is_signed);
        }
        list[c] = m;
    }
    *kept = mt_fqt_topk_select(channels, k < 0 ? 0 : (k > channels ? channels : k), list, mask);
    c4 = 0;
#if MT_DSP
    for (c4 = 0; c4 + 4 <= channels; c4 += 4) { /* a word of four channels: kept lanes stay */
        uint32_t m4, keep4, fill4;
        uint8_t *q = e + c4;
        uint8_t *const end = q + rows * channels, *const end2 = q + (rows & ~1) * channels;
        memcpy(&m4, mask + c4, 4);
        keep4 = m4 * 0xFFu; /* 0x01 -> 0xFF per kept lane */
        fill4 = (0x01010101u * fill) & ~keep4;
        if (keep4 == 0xFFFFFFFFu) {
            continue;
        }
        if (keep4 == 0) {
            for (; q != end2; q += 2 * channels) {
                memcpy(q, &fill4, 4);
                memcpy(q + channels, &fill4, 4);
            }
            if (rows & 1) {
                memcpy(q, &fill4, 4);
            }
            continue;
        }
        for (; q != end; q += channels) {
            uint32_t w;
            memcpy(&w, q, 4);
            w = (w & keep4) | fill4;
            memcpy(q, &w, 4);
        }
    }
#endif /* MT_DSP */
    for (c = c4; c < channels; ++c) {
        if (!mask[c]) {
            uint8_t *q = e + c;
            for (p = 0; p + 2 <= rows; p += 2, q += 2 * channels) {
                q[0] = fill;
                q[channels] = fill;
            }
            if (p < rows) {
                *q = fill;
            }
        }
    }
    return MT_OK;
}

mt_status mt_fqt_topk_s8(int32_t rows, int32_t channels, int32_t k, int8_t *e, int32_t *list, uint8_t *mask,
                         int32_t *kept)
{
    return topk_bytes(rows, channels, k, 0, 1, (uint8_t *)e, list, mask, kept);
}

mt_status mt_fqt_topk_u8(int32_t rows, int32_t channels, int32_t k, int32_t e_zero_point, uint8_t *e,
                         int32_t *list, uint8_t *mask, int32_t *kept)
{
    return topk_bytes(rows, channels, k, e_zero_point, 0, e, list, mask, kept);
}
