/*
 * mcutrain runtime: instruction wrappers of the training kernels' fast paths (internal, not API).
 *
 * Two switches, both from mt_arch.h's conventions:
 *   MT_DSP        (mt_arch.h) the Armv7E-M DSP loops: USADA8, QSUB, SSAT; emulated in portable C
 *                 under MT_EMULATE_DSP so hosts test the same loops.
 *   MT_FPU_SP     the core has a single-precision FPU (Cortex-M4F, M7: __ARM_FP bit 2) and the
 *                 build is not MT_KERNELS_REF. Then an int32 -> float32 conversion is one VCVT,
 *                 which IEEE 754 rounds to nearest even (the FPSCR default): exactly
 *                 mt_s32_to_f32; and VCVT's fixed-point and saturating forms replace a multiply
 *                 and the range checks of mt_floor_f32. Portable C gives the same bits elsewhere.
 * Neither changes a result (tests/codegen/test_fqt_dsp.py holds both builds to the simulator).
 */
#ifndef MT_TRAIN_DSP_H
#define MT_TRAIN_DSP_H

#include <stdint.h>
#include <string.h>

#include "mt_arch.h"
#include "mt_fqt_math.h"

#if !defined(MT_KERNELS_REF) && defined(__ARM_FP) && (__ARM_FP & 4)
#define MT_FPU_SP 1
#include <arm_acle.h>
#else  /* !(!defined(MT_KERNELS_REF) && defined(__ARM_FP) && (__ARM_FP & 4)) */
#define MT_FPU_SP 0
#endif /* !MT_KERNELS_REF && __ARM_FP & 4 */

#if MT_DSP
#if defined(MT_DSP_NATIVE)
#include <arm_acle.h>

/* acc + sum over the four bytes of |a_i - b_i| (unsigned bytes). */
MT_INLINE uint32_t mt_usada8(uint32_t a, uint32_t b, uint32_t acc)
{
    return __usada8(a, b, acc);
}

/* acc + (x half) * (y half): B = bottom (bits 0-15), T = top, signed 16-bit; one MAC each
   (mt_smlabb and mt_smlatt are in mt_arch.h). */
MT_INLINE int32_t mt_smlatb(int32_t x, int32_t y, int32_t acc)
{
    return __smlatb(x, y, acc);
}

MT_INLINE int32_t mt_smlabt(int32_t x, int32_t y, int32_t acc)
{
    return __smlabt(x, y, acc);
}

#else /* !MT_DSP_NATIVE: portable emulation (MT_EMULATE_DSP) */

MT_INLINE int32_t mt_half(int32_t x, int top)
{
    return (int32_t)(int16_t)(uint16_t)(((uint32_t)x >> (top ? 16 : 0)) & 0xFFFFu);
}

/* Wrapping sums like the instructions; the kernels' bounds keep them exact. */
MT_INLINE int32_t mt_smlatb(int32_t x, int32_t y, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(mt_half(x, 1) * mt_half(y, 0)));
}

MT_INLINE int32_t mt_smlabt(int32_t x, int32_t y, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(mt_half(x, 0) * mt_half(y, 1)));
}

MT_INLINE uint32_t mt_usada8(uint32_t a, uint32_t b, uint32_t acc)
{
    int k;
    for (k = 0; k < 4; ++k) {
        const int32_t d = (int32_t)((a >> (8 * k)) & 0xFFu) - (int32_t)((b >> (8 * k)) & 0xFFu);
        acc += (uint32_t)(d < 0 ? -d : d);
    }
    return acc;
}

#endif /* MT_DSP_NATIVE */

/* sum |w[k]| of n int8 values, four per USADA8 (|w| = |(w ^ 0x80) - 0x80| as unsigned bytes). */
MT_INLINE int64_t mt_l1_s8(const int8_t *w, int32_t n)
{
    uint32_t acc = 0; /* NOTE: n * 128 < 2^32 for any row below 2^25 weights */
    int32_t k = 0;
    for (; k + 8 <= n; k += 8) {
        uint32_t a, b;
        memcpy(&a, w + k, 4);
        memcpy(&b, w + k + 4, 4);
        acc = mt_usada8(a ^ 0x80808080u, 0x80808080u, acc);
        acc = mt_usada8(b ^ 0x80808080u, 0x80808080u, acc);
    }
    for (; k < n; ++k) {
        acc += (uint32_t)(w[k] < 0 ? -w[k] : w[k]);
    }
    return (int64_t)acc;
}

#endif /* MT_DSP */

/* float32(v) of an int32, rounded to nearest even (numpy's cast). */
MT_INLINE float mt_cvt_s32_f32(int32_t v)
{
#if MT_FPU_SP
    return (float)v; /* one VCVT.F32.S32, FPSCR rounding mode: to nearest even */
#else  /* !MT_FPU_SP */
    return mt_s32_to_f32(v);
#endif /* MT_FPU_SP */
}

/* The uniform draw of a xorshift32 output x: (x >> 8) * 2^-24, exact (24 bits). */
MT_INLINE float mt_unit24_f32(uint32_t x)
{
#if MT_FPU_SP
    float f;
    __asm__("vmov %0, %1\n\tvcvt.f32.s32 %0, %0, #24" : "=t"(f) : "r"(x >> 8));
    return f;
#else  /* !MT_FPU_SP */
    return (float)(int32_t)(x >> 8) * 0x1p-24f;
#endif /* MT_FPU_SP */
}

/*
 * |v| as the bits of a float32 (sign cleared): for finite or infinite values these order as the
 * magnitudes do, so a running maximum can stay in an integer register (no VCMP / VMRS per value).
 */
MT_INLINE uint32_t mt_abs_bits_f32(float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    return b & 0x7FFFFFFFu;
}

/* clamp(floor(v), -127, 127) for a finite float32 v, as int32. */
MT_INLINE int32_t mt_floor_clamp127_f32(float v)
{
#if MT_FPU_SP
    float t;
    int32_t r;
    /* VCVT to int32 truncates toward zero and saturates: defined for every v */
    __asm__("vcvt.s32.f32 %0, %1" : "=t"(t) : "t"(v));
    memcpy(&r, &t, 4);
    __asm__("vcvt.f32.s32 %0, %0" : "+t"(t));
    r = __ssat(r, 8); /* [-128, 127]: the decrement below cannot wrap */
    if (t > v) { /* trunc(v) > v: v < 0 and not integral, floor is one lower */
        --r;
    }
    return r < -127 ? -127 : r;
#else  /* !MT_FPU_SP */
    const float f = mt_floor_f32(v);
    return f < -127.0f ? -127 : (f > 127.0f ? 127 : (int32_t)f);
#endif /* MT_FPU_SP */
}

#endif /* MT_TRAIN_DSP_H */
