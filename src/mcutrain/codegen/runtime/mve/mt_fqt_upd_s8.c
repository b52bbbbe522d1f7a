/*
 * The FQT int8 in-place update of one layer (the float32 order: mt_fqt_upd_s8_ref.h). Helium
 * (MVE) twin of train/fqt/mt_fqt_upd_s8.c, bit-exact with it: the same driver (the header), whose
 * four passes over a row take four slots a loop pass after the scalar passes took the row's first
 * n % 4 (which keeps the order of the sums and draws); rows shorter than 4, rows whose check below
 * fails and builds without MVE-F run the scalar passes whole.
 *
 * Why only some operations are vector ones: MVE's floating-point instructions compute as with
 * the "standard FPSCR value" (subnormal inputs and results flushed to zero, default NaN, round to
 * nearest), the scalar FPU as IEEE 754 with the library's FPSCR (no flushing). So a vector
 * operation is used only where neither can differ:
 *   - float32(grad) * g_scale and float32(w) * s_w: an integer of magnitude >= 1 times a normal
 *     scale (checked per row) is 0 or at least 2^-126, never subnormal;
 *   - g - mu of the step with 2^-100 <= |mu| (checked per row): a subnormal g is below half an
 *     ulp of mu, so IEEE rounds g - mu to -mu, as the flushed g gives; and two values of magnitude
 *     >= 2^-101 differ by 0 or at least 2^-124 (a multiple of their ulp), never subnormal; g - mu
 *     of the sum of squares with any non-NaN mu (sq_dev_mve: only its square counts);
 *   - int32 <-> float32 conversions of the stream's 24-bit draws (exact), integer lanes.
 * Everything whose operand or result may be subnormal stays scalar on the lanes themselves (Q0-Q3
 * are S0-S15): the divisions, lr * g_hat, the subtraction from w * s_w, the squares, the sums in
 * increasing k, the draw's addition and floor (VCVTM: rounds toward minus infinity without an FPSCR
 * switch, saturating as the reference's VCVTR does). The xorshift32 draws stay scalar (one serial
 * stream), four a pass, then go to the lanes one VMOV each (S4-S7: no doubt which lane gets which).
 */
#include "mt_arch.h"
#include "mt_fqt.h"
#include "mt_mve.h"
#include "mt_train_dsp.h"

#if MT_MVE && MT_FPU_SP && defined(__GNUC__) && (__ARM_FEATURE_MVE & 2)
#define MT_UPD_MVE 1
static float scale_sum_mve(int32_t *g, int32_t n, float g_scale);
static float sq_dev_mve(const int32_t *g, int32_t n, float mu);
static float step_mve(int32_t *g, const int8_t *w, int32_t n, float s_w, float lr, float mu, float den, int zero);
static uint32_t requant_mve(const int32_t *g, int8_t *w, int32_t n, float s_new, uint32_t x);
#define MT_UPD_ROW(pass) pass##_mve
#else /* no MVE-F: the scalar passes */
#define MT_UPD_MVE 0
#endif /* MT_MVE && MT_FPU_SP && __GNUC__ && __ARM_FEATURE_MVE & 2 */

#include "mt_fqt_upd_s8_ref.h"

#if MT_UPD_MVE

/* The bits of f. */
MT_INLINE uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* A normal or infinite scale (no zero, subnormal or NaN): products with integers never subnormal. */
MT_INLINE int normal_scale(float s)
{
    const uint32_t a = bits_of(s) & 0x7FFFFFFFu;
    return a >= 0x00800000u && a <= 0x7F800000u;
}

/* 2^-100 <= |mu| <= inf: g - mu is the same flushed or not (see the header comment). */
MT_INLINE int far_mu(float mu)
{
    const uint32_t a = bits_of(mu) & 0x7FFFFFFFu;
    return a >= (27u << 23) && a <= 0x7F800000u;
}

/* The end of a pass of the two summing loops: acc += S0, S1, S2, S3 in lane (= k) order, scalar. */
#define ADD_LANES_AND_LOOP                     \
    "vadd.f32     %[acc], %[acc], s0\n\t"       \
    "vadd.f32     %[acc], %[acc], s1\n\t"       \
    "vadd.f32     %[acc], %[acc], s2\n\t"       \
    "vadd.f32     %[acc], %[acc], s3\n\t"       \
    "subs         %[n], %[n], #1\n\t"           \
    "bne          1b"

/* g[k] <- float32(g[k]) * g_scale (vector); their sum from +0.0 in increasing k (scalar, on the lanes). */
static float scale_sum_mve(int32_t *g, int32_t n, float g_scale)
{
    int32_t n4 = n >> 2;
    float sum;
    if (n4 < 1 || !normal_scale(g_scale)) {
        return row_scale_sum(g, n, g_scale);
    }
    sum = row_scale_sum(g, n & 3, g_scale); /* the first n % 4 slots */
    g += n & 3;
    {
        __asm__ volatile("1:\n\t"
                         "vldrw.u32    q0, [%[g]]\n\t"
                         "vcvt.f32.s32 q0, q0\n\t"
                         "vmul.f32     q0, q0, %[s]\n\t"
                         "vstrw.32     q0, [%[g]], #16\n\t"
                         ADD_LANES_AND_LOOP
                         : [g] "+r"(g), [n] "+r"(n4), [acc] "+t"(sum)
                         : [s] "r"(bits_of(g_scale))
                         : "cc", "memory", "s0", "s1", "s2", "s3");
    }
    return sum;
}

/*
 * sum (g[k] - mu)^2 from +0.0 in increasing k: the differences vector, squares and sums scalar.
 * No check of mu but NaN (a NaN g makes mu NaN too): where flushing changes g - mu, |g - mu| is
 * below 2^-99 and its IEEE square is +0.0, as the flushed difference's is.
 */
static float sq_dev_mve(const int32_t *g, int32_t n, float mu)
{
    int32_t n4 = n >> 2;
    float var;
    if (n4 < 1 || (bits_of(mu) & 0x7FFFFFFFu) > 0x7F800000u) {
        return row_sq_dev(g, n, mu);
    }
    var = row_sq_dev(g, n & 3, mu);
    g += n & 3;
    {
        __asm__ volatile("1:\n\t"
                         "vldrw.u32 q0, [%[g]], #16\n\t"
                         "vsub.f32  q0, q0, %[mu]\n\t"
                         "vmul.f32  s0, s0, s0\n\t"
                         "vmul.f32  s1, s1, s1\n\t"
                         "vmul.f32  s2, s2, s2\n\t"
                         "vmul.f32  s3, s3, s3\n\t"
                         ADD_LANES_AND_LOOP
                         : [g] "+r"(g), [n] "+r"(n4), [acc] "+t"(var)
                         : [mu] "r"(bits_of(mu))
                         : "cc", "memory", "s0", "s1", "s2", "s3");
    }
    return var;
}

/*
 * g[k] <- float32(w[k]) * s_w - lr * ((g[k] - mu) / den), four a pass (the differences and
 * w * s_w vector, the rest scalar on the lanes); the running maximum of |g[k]| as bits shifted
 * left by one (the sign out) in unsigned lanes, reduced once at the end. sd == 0 rows (g_hat 0):
 * float32(w[k]) * s_w - lr * 0.0f, all vector (the subtrahend is +-0.0 for a finite lr: exact).
 */
static float step_mve(int32_t *g, const int8_t *w, int32_t n, float s_w, float lr, float mu, float den, int zero)
{
    int32_t n4 = n >> 2;
    uint32_t am2;
    float amax;
    const float lz = lr * 0.0f;
    if (n4 < 1 || !normal_scale(s_w) || (zero ? (bits_of(lz) & 0x7FFFFFFFu) != 0u : !far_mu(mu))) {
        return row_step(g, w, n, s_w, lr, mu, den, zero);
    }
    amax = row_step(g, w, n & 3, s_w, lr, mu, den, zero);
    am2 = bits_of(amax) << 1; /* a magnitude's bits: bit 31 clear */
    g += n & 3;
    w += n & 3;
    if (zero) {
        __asm__ volatile("vmov.i32     q2, #0\n\t"
                         "1:\n\t"
                         "vldrb.s32    q1, [%[w]], #4\n\t"
                         "vcvt.f32.s32 q1, q1\n\t"
                         "vmul.f32     q1, q1, %[sw]\n\t"
                         "vsub.f32     q1, q1, %[lz]\n\t"
                         "vstrw.32     q1, [%[g]], #16\n\t"
                         "vshl.i32     q1, q1, #1\n\t"
                         "vmax.u32     q2, q2, q1\n\t"
                         "subs         %[n], %[n], #1\n\t"
                         "bne          1b\n\t"
                         "vmaxv.u32    %[am], q2"
                         : [g] "+r"(g), [w] "+r"(w), [n] "+r"(n4), [am] "+r"(am2)
                         : [sw] "r"(bits_of(s_w)), [lz] "r"(bits_of(lz))
                         : "cc", "memory", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11");
    } else {
        __asm__ volatile("vmov.i32     q2, #0\n\t"
                         "1:\n\t"
                         "vldrw.u32    q0, [%[g]]\n\t"
                         "vsub.f32     q0, q0, %[mu]\n\t"
                         "vldrb.s32    q1, [%[w]], #4\n\t"
                         "vdiv.f32     s0, s0, %[den]\n\t"
                         "vdiv.f32     s1, s1, %[den]\n\t"
                         "vdiv.f32     s2, s2, %[den]\n\t"
                         "vdiv.f32     s3, s3, %[den]\n\t"
                         "vcvt.f32.s32 q1, q1\n\t"
                         "vmul.f32     s0, %[lr], s0\n\t"
                         "vmul.f32     s1, %[lr], s1\n\t"
                         "vmul.f32     s2, %[lr], s2\n\t"
                         "vmul.f32     s3, %[lr], s3\n\t"
                         "vmul.f32     q1, q1, %[sw]\n\t"
                         "vsub.f32     s4, s4, s0\n\t"
                         "vsub.f32     s5, s5, s1\n\t"
                         "vsub.f32     s6, s6, s2\n\t"
                         "vsub.f32     s7, s7, s3\n\t"
                         "vstrw.32     q1, [%[g]], #16\n\t"
                         "vshl.i32     q1, q1, #1\n\t"
                         "vmax.u32     q2, q2, q1\n\t"
                         "subs         %[n], %[n], #1\n\t"
                         "bne          1b\n\t"
                         "vmaxv.u32    %[am], q2"
                         : [g] "+r"(g), [w] "+r"(w), [n] "+r"(n4), [am] "+r"(am2)
                         : [mu] "r"(bits_of(mu)), [sw] "r"(bits_of(s_w)), [den] "t"(den), [lr] "t"(lr)
                         : "cc", "memory", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11");
    }
    am2 >>= 1;
    memcpy(&amax, &am2, 4);
    return amax;
}

/*
 * w[k] <- clamp(floor(g[k] / s_new + u), -127, 127), four draws a pass: the divisions, additions
 * and floors scalar on the lanes, the draws' (x >> 8) * 2^-24 and the clamp vector.
 */
static uint32_t requant_mve(const int32_t *g, int8_t *w, int32_t n, float s_new, uint32_t x)
{
    int32_t n4 = n >> 2;
    x = row_requant(g, w, n & 3, s_new, x); /* the first n % 4 draws */
    g += n & 3;
    w += n & 3;
    if (n4 > 0) {
        uint32_t a, b, c;
        __asm__ volatile("vmov.i32      q2, #127\n\t"
                         "vmvn.i32      q3, #126\n\t"
                         "1:\n\t"
                         "vldrw.u32     q0, [%[g]], #16\n\t"
                         "eor           %[a], %[x], %[x], lsl #13\n\t"
                         "eor           %[a], %[a], %[a], lsr #17\n\t"
                         "eor           %[a], %[a], %[a], lsl #5\n\t"
                         "vdiv.f32      s0, s0, %[s]\n\t"
                         "eor           %[b], %[a], %[a], lsl #13\n\t"
                         "eor           %[b], %[b], %[b], lsr #17\n\t"
                         "eor           %[b], %[b], %[b], lsl #5\n\t"
                         "vdiv.f32      s1, s1, %[s]\n\t"
                         "eor           %[c], %[b], %[b], lsl #13\n\t"
                         "eor           %[c], %[c], %[c], lsr #17\n\t"
                         "eor           %[c], %[c], %[c], lsl #5\n\t"
                         "vdiv.f32      s2, s2, %[s]\n\t"
                         "eor           %[x], %[c], %[c], lsl #13\n\t"
                         "eor           %[x], %[x], %[x], lsr #17\n\t"
                         "eor           %[x], %[x], %[x], lsl #5\n\t"
                         "vdiv.f32      s3, s3, %[s]\n\t"
                         "vmov          s4, %[a]\n\t"
                         "vmov          s5, %[b]\n\t"
                         "vmov          s6, %[c]\n\t"
                         "vmov          s7, %[x]\n\t"
                         "vshr.u32      q1, q1, #8\n\t"
                         "vcvt.f32.u32  q1, q1, #24\n\t"
                         "vadd.f32      s0, s0, s4\n\t"
                         "vadd.f32      s1, s1, s5\n\t"
                         "vadd.f32      s2, s2, s6\n\t"
                         "vadd.f32      s3, s3, s7\n\t"
                         "vcvtm.s32.f32 s0, s0\n\t"
                         "vcvtm.s32.f32 s1, s1\n\t"
                         "vcvtm.s32.f32 s2, s2\n\t"
                         "vcvtm.s32.f32 s3, s3\n\t"
                         "vmin.s32      q0, q0, q2\n\t"
                         "vmax.s32      q0, q0, q3\n\t"
                         "vstrb.32      q0, [%[w]], #4\n\t"
                         "subs          %[n], %[n], #1\n\t"
                         "bne           1b"
                         : [g] "+r"(g), [w] "+r"(w), [n] "+r"(n4), [x] "+r"(x), [a] "=&r"(a), [b] "=&r"(b),
                           [c] "=&r"(c)
                         : [s] "t"(s_new)
                         : "cc", "memory", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11",
                           "s12", "s13", "s14", "s15");
    }
    return x;
}

#endif /* MT_UPD_MVE */
