/*
 * mcutrain runtime: the one architecture header.
 *
 * It maps compiler feature macros to our switch MT_DSP, which selects the inner loops that use
 * the Armv7E-M DSP instructions (SMLAD, SMLABB/SMLATT, SXTB16, SXTAB16, PKH). Every kernel also has a pure C path,
 * and both paths give bit-identical results (all arithmetic is exact integer arithmetic).
 *
 * Build options that select a path (none of them changes any result):
 *   MT_KERNELS_REF   force the portable reference loops even where DSP exists
 *   MT_EMULATE_DSP   run the DSP loops on any host with portable C emulations of the
 *                    instructions (used to test the DSP code path with host sanitizers)
 * Without either, MT_DSP is 1 exactly when the compiler defines __ARM_FEATURE_DSP (Cortex-M4,
 * M7, M33 with DSP, ...), else 0 (Cortex-M0+, M3, hosts).
 */
#ifndef MT_ARCH_H
#define MT_ARCH_H

#include <stdint.h>
#include <string.h>

#if defined(MT_KERNELS_REF)
#define MT_DSP 0
#elif defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#define MT_DSP 1
#define MT_DSP_NATIVE 1
#elif defined(MT_EMULATE_DSP)
#define MT_DSP 1
#else  /* no DSP, no emulation */
#define MT_DSP 0
#endif /* MT_KERNELS_REF / __ARM_FEATURE_DSP / MT_EMULATE_DSP */

/* MT_INLINE: bodies shared through headers, always inlined; MT_NOINLINE: a function kept out of
   line (a hot loop whose registers must not be shared with its caller, or a cold path). */
#if defined(__GNUC__)
#define MT_INLINE static inline __attribute__((always_inline))
#define MT_NOINLINE __attribute__((noinline))
#else  /* !defined(__GNUC__) */
#define MT_INLINE static inline
#define MT_NOINLINE
#endif /* __GNUC__ */

/*
 * MT_UNROLL_DOT: put before the int8 dot-product loop of a reference kernel. On RV32 (RISC-V has
 * no post-increment addressing, so a byte loop spends three of its eight instructions on two
 * pointer increments and the branch) it asks GCC to unroll the loop by four, which folds the
 * increments into load offsets; elsewhere it is empty. The C stays the portable loop and every
 * sum is the same exact integer sum, so no result changes (MT_NO_UNROLL turns it off, to measure).
 */
#if defined(__riscv) && defined(__GNUC__) && !defined(__clang__) && !defined(MT_NO_UNROLL)
#define MT_UNROLL_DOT _Pragma("GCC unroll 4")
#else  /* not RISC-V with GCC, or MT_NO_UNROLL */
#define MT_UNROLL_DOT
#endif /* __riscv && __GNUC__ && !MT_NO_UNROLL */

#if MT_DSP

/* Unaligned little-endian loads and stores; memcpy compiles to one LDR/STR on Armv7E-M. */
MT_INLINE int32_t mt_read_s8x4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

MT_INLINE int32_t mt_read_s16x2(const int16_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

MT_INLINE void mt_write_s16x2(int16_t *p, int32_t v)
{
    memcpy(p, &v, 4);
}

MT_INLINE void mt_write_s8x4(int8_t *p, int32_t v)
{
    memcpy(p, &v, 4);
}

#if defined(MT_DSP_NATIVE)
#include <arm_acle.h>

/* acc + x.lo * y.lo + x.hi * y.hi (signed 16-bit halves). */
MT_INLINE int32_t mt_smlad(int32_t x, int32_t y, int32_t acc)
{
    return __smlad(x, y, acc);
}

/* Sign-extend bytes 0 and 2 of x to the two 16-bit halves. */
MT_INLINE int32_t mt_sxtb16(int32_t x)
{
    return (int32_t)__sxtb16(x);
}

/* Sign-extend bytes 1 and 3 of x (SXTB16 with ROR #8; GCC's ACLE has no __ror to fuse). */
MT_INLINE int32_t mt_sxtb16_ror8(int32_t x)
{
    int32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}

/* Halves of a plus bytes 0 and 2 of x, sign-extended. */
MT_INLINE int32_t mt_sxtab16(int32_t a, int32_t x)
{
    return (int32_t)__sxtab16(a, x);
}

/* Halves of a plus bytes 1 and 3 of x, sign-extended. */
MT_INLINE int32_t mt_sxtab16_ror8(int32_t a, int32_t x)
{
    int32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(a), "r"(x));
    return r;
}

/* Bytewise signed maximum of four int8 lanes (SSUB8 sets the GE flags, SEL picks by them). */
MT_INLINE int32_t mt_max_s8x4(int32_t a, int32_t b)
{
    int32_t r;
    __asm__("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(a), "r"(b) : "cc");
    return r;
}

/* The low halves of a and b as one word: (a.lo, b.lo) (PKHBT with LSL #16). */
MT_INLINE int32_t mt_pkhbt(int32_t a, int32_t b)
{
    int32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

/* acc + x.lo * y.lo (signed 16-bit halves; SMLABB). */
MT_INLINE int32_t mt_smlabb(int32_t x, int32_t y, int32_t acc)
{
    return __smlabb(x, y, acc);
}

/* acc + x.hi * y.hi (signed 16-bit halves; SMLATT). */
MT_INLINE int32_t mt_smlatt(int32_t x, int32_t y, int32_t acc)
{
    return __smlatt(x, y, acc);
}

/* The high halves of a and b as one word: (a.hi, b.hi) (PKHTB with ASR #16). */
MT_INLINE int32_t mt_pkhtb(int32_t a, int32_t b)
{
    int32_t r;
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(b), "r"(a));
    return r;
}

#else /* !MT_DSP_NATIVE: portable emulation (MT_EMULATE_DSP) */

MT_INLINE int32_t mt_lo16(int32_t x)
{
    return (int32_t)(int16_t)(uint16_t)((uint32_t)x & 0xFFFFu);
}

MT_INLINE int32_t mt_hi16(int32_t x)
{
    return (int32_t)(int16_t)(uint16_t)((uint32_t)x >> 16);
}

MT_INLINE int32_t mt_pack16(int32_t lo, int32_t hi)
{
    return (int32_t)(((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16));
}

MT_INLINE int32_t mt_byte(int32_t x, int k)
{
    return (int32_t)(int8_t)(uint8_t)(((uint32_t)x >> (8 * k)) & 0xFFu);
}

MT_INLINE int32_t mt_smlad(int32_t x, int32_t y, int32_t acc)
{
    /* Wrapping sum like the instruction; kernels' bounds keep it exact. */
    uint32_t s = (uint32_t)acc + (uint32_t)(mt_lo16(x) * mt_lo16(y)) + (uint32_t)(mt_hi16(x) * mt_hi16(y));
    return (int32_t)s;
}

MT_INLINE int32_t mt_sxtb16(int32_t x)
{
    return mt_pack16(mt_byte(x, 0), mt_byte(x, 2));
}

MT_INLINE int32_t mt_sxtb16_ror8(int32_t x)
{
    return mt_pack16(mt_byte(x, 1), mt_byte(x, 3));
}

MT_INLINE int32_t mt_sxtab16(int32_t a, int32_t x)
{
    return mt_pack16(mt_lo16(a) + mt_byte(x, 0), mt_hi16(a) + mt_byte(x, 2));
}

MT_INLINE int32_t mt_sxtab16_ror8(int32_t a, int32_t x)
{
    return mt_pack16(mt_lo16(a) + mt_byte(x, 1), mt_hi16(a) + mt_byte(x, 3));
}

MT_INLINE int32_t mt_max_s8x4(int32_t a, int32_t b)
{
    uint32_t r = 0;
    int k;
    for (k = 0; k < 4; k++) {
        const int32_t m = mt_byte(a, k) > mt_byte(b, k) ? mt_byte(a, k) : mt_byte(b, k);
        r |= ((uint32_t)m & 0xFFu) << (8 * k);
    }
    return (int32_t)r;
}

MT_INLINE int32_t mt_pkhbt(int32_t a, int32_t b)
{
    return mt_pack16(mt_lo16(a), mt_lo16(b));
}

MT_INLINE int32_t mt_smlabb(int32_t x, int32_t y, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(mt_lo16(x) * mt_lo16(y)));
}

MT_INLINE int32_t mt_smlatt(int32_t x, int32_t y, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(mt_hi16(x) * mt_hi16(y)));
}

MT_INLINE int32_t mt_pkhtb(int32_t a, int32_t b)
{
    return mt_pack16(mt_hi16(a), mt_hi16(b));
}

#endif /* MT_DSP_NATIVE */
#endif /* MT_DSP */

#endif /* MT_ARCH_H */
