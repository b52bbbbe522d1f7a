/*
 * The FQT int8 in-place update of one layer: the whole kernel, shared by the reference
 * (train/fqt/mt_fqt_upd_s8.c, which only includes it) and its Helium twin (mve/mt_fqt_upd_s8.c),
 * and included by exactly one of them in a build. The per-channel driver calls the four passes
 * over a row by MT_UPD_ROW's names: the scalar ones below, or the twin's vector ones (declared
 * before it includes this header), which run a row's first n % 4 slots through the scalar ones
 * (sums from +0.0, the stream's first draws: the order is kept) and the rest four at a time. The
 * reference's code is unchanged by the split (the same functions, the same inlining).
 *
 * Python twins: fqt.FQT._standardize and fqt.FQT._update_layer, int8 weights, stochastic
 * rounding. Per channel, in this float32 order:
 *   g[k]   = float32(grad[k]) * g_scale (k < K), g[K] = float32(grad_bias) * gb_scale
 *   mu_b   = (sum_k g[k]) / (K + 1), var_b = (sum_k (g[k] - mu_b) * (g[k] - mu_b)) / (K + 1),
 *            sums from +0.0 in increasing k;  sd_b = sqrt(var_b) (correctly rounded)
 *   mu     = initialized ? (1 - a_n) * mu + a_n * mu_b : mu_b (sd likewise)
 *   g_hat  = (g - mu) / (sd + 1e-12), or 0 when sd == 0
 *   new    = float32(w) * s_w - lr * g_hat;  amax = max |new|
 *   lo, hi = (1 - a_w) * lo + a_w * (-amax), (1 - a_w) * hi + a_w * amax
 *   s_w'   = max(-min(lo, 0), max(hi, 0)) / 127 (2^-20 if 0, at least 2^-126)
 *   w'     = clamp(floor(new / s_w' + u), -127, 127), u = uniform01 of the stream
 * No float copy is allocated: the int32 gradient buffer (consumed) holds the row's real gradient,
 * then its new real weights (float32 in the int32 slots).
 */
#ifndef MT_FQT_UPD_S8_REF_H
#define MT_FQT_UPD_S8_REF_H

#include <string.h>

#include "mt_fqt.h"
#include "mt_fqt_math.h"
#include "mt_train.h"
#include "mt_train_dsp.h"

/* The FPU loops in assembly (float32 operations in the same order; MT_FPU_SP: M4F, M7). */
#if MT_FPU_SP && defined(__GNUC__)
#define MT_FPU_ASM 1
#else  /* !(MT_FPU_SP && defined(__GNUC__)) */
#define MT_FPU_ASM 0
#endif /* MT_FPU_SP && __GNUC__ */

/* The float32 stored in an int32 slot of the consumed gradient buffer (same size, no aliasing UB). */
static float mt_slot_get(const int32_t *slot)
{
    float f;
    memcpy(&f, slot, 4);
    return f;
}

static void mt_slot_set(int32_t *slot, float f)
{
    memcpy(slot, &f, 4);
}

/*
 * The four passes over one row, each a small loop (every float32 operation in the order of the header
 * comment; two elements per loop pass where the order allows); on FPU cores in assembly, which loads
 * and stores the float32 slots straight from the FPU registers.
 */

/* g[k] <- float32(g[k]) * g_scale in place; returns their sum from +0.0 in increasing k. */
static float row_scale_sum(int32_t *g, int32_t n, float g_scale)
{
    float sum = 0.0f;
    int32_t k = 0;
#if MT_FPU_ASM
    int32_t n2 = n >> 1;
    if (n2 > 0) { /* VLDR straight into the FPU, VSTM back (no core-register round trip) */
        float v0, v1;
        __asm__ volatile("1:\n\t"
                         "vldr         %[v0], [%[g]]\n\t"
                         "vldr         %[v1], [%[g], #4]\n\t"
                         "vcvt.f32.s32 %[v0], %[v0]\n\t"
                         "vcvt.f32.s32 %[v1], %[v1]\n\t"
                         "vmul.f32     %[v0], %[v0], %[s]\n\t"
                         "vmul.f32     %[v1], %[v1], %[s]\n\t"
                         "vstmia       %[g]!, {%[v0]}\n\t"
                         "vstmia       %[g]!, {%[v1]}\n\t"
                         "vadd.f32     %[sum], %[sum], %[v0]\n\t"
                         "vadd.f32     %[sum], %[sum], %[v1]\n\t"
                         "subs         %[n], %[n], #1\n\t"
                         "bne          1b"
                         : [g] "+r"(g), [n] "+r"(n2), [sum] "+t"(sum), [v0] "=&t"(v0), [v1] "=&t"(v1)
                         : [s] "t"(g_scale)
                         : "cc", "memory");
    }
    if (n & 1) {
        const float v = mt_cvt_s32_f32(g[0]) * g_scale;
        mt_slot_set(&g[0], v);
        sum += v;
    }
    (void)k;
    return sum;
#else  /* !MT_FPU_ASM */
    for (; k + 2 <= n; k += 2) {
        const float v0 = mt_cvt_s32_f32(g[k]) * g_scale;
        const float v1 = mt_cvt_s32_f32(g[k + 1]) * g_scale;
        mt_slot_set(&g[k], v0);
        mt_slot_set(&g[k + 1], v1);
        sum += v0;
        sum += v1;
    }
    if (k < n) {
        const float v = mt_cvt_s32_f32(g[k]) * g_scale;
        mt_slot_set(&g[k], v);
        sum += v;
    }
    return sum;
#endif /* MT_FPU_ASM */
}

/* sum (g[k] - mu)^2 from +0.0 in increasing k. */
static float row_sq_dev(const int32_t *g, int32_t n, float mu)
{
    float var = 0.0f;
    int32_t k = 0;
#if MT_FPU_ASM
    int32_t n2 = n >> 1;
    if (n2 > 0) {
        float d0, d1;
        __asm__ volatile("1:\n\t"
                         "vldmia   %[g]!, {%[d0]}\n\t"
                         "vldmia   %[g]!, {%[d1]}\n\t"
                         "vsub.f32 %[d0], %[d0], %[mu]\n\t"
                         "vsub.f32 %[d1], %[d1], %[mu]\n\t"
                         "vmul.f32 %[d0], %[d0], %[d0]\n\t"
                         "vmul.f32 %[d1], %[d1], %[d1]\n\t"
                         "vadd.f32 %[var], %[var], %[d0]\n\t"
                         "vadd.f32 %[var], %[var], %[d1]\n\t"
                         "subs     %[n], %[n], #1\n\t"
                         "bne      1b"
                         : [g] "+r"(g), [n] "+r"(n2), [var] "+t"(var), [d0] "=&t"(d0), [d1] "=&t"(d1)
                         : [mu] "t"(mu)
                         : "cc", "memory");
    }
    if (n & 1) {
        const float d = mt_slot_get(&g[0]) - mu;
        var += d * d;
    }
    (void)k;
    return var;
#else  /* !MT_FPU_ASM */
    for (; k + 2 <= n; k += 2) {
        const float d0 = mt_slot_get(&g[k]) - mu;
        const float d1 = mt_slot_get(&g[k + 1]) - mu;
        var += d0 * d0;
        var += d1 * d1;
    }
    if (k < n) {
        const float d = mt_slot_get(&g[k]) - mu;
        var += d * d;
    }
    return var;
#endif /* MT_FPU_ASM */
}

/*
 * g[k] <- float32(w[k]) * s_w - lr * g_hat[k] (the new real weights); returns max |g[k]|, kept as
 * bits (mt_abs_bits_f32: equal to the float maximum, since every value here is finite).
 */
static float row_step(int32_t *g, const int8_t *w, int32_t n, float s_w, float lr, float mu, float den, int zero)
{
    uint32_t amax = 0u;
    float f;
    int32_t k;
    if (zero) { /* sd == 0: g_hat = 0 */
        for (k = 0; k < n; ++k) {
            const float nw = (float)w[k] * s_w - lr * 0.0f;
            const uint32_t a = mt_abs_bits_f32(nw);
            amax = a > amax ? a : amax;
            mt_slot_set(&g[k], nw);
        }
    } else {
#if MT_FPU_ASM
        if (n > 0) {
            int32_t t;
            float y, u;
            __asm__ volatile("1:\n\t"
                             "vldr         %[y], [%[g]]\n\t"
                             "ldrsb        %[t], [%[w]], #1\n\t"
                             "vsub.f32     %[y], %[y], %[mu]\n\t"
                             "vmov         %[u], %[t]\n\t"
                             "vdiv.f32     %[y], %[y], %[den]\n\t"
                             "vcvt.f32.s32 %[u], %[u]\n\t"
                             "vmul.f32     %[y], %[lr], %[y]\n\t"
                             "vmul.f32     %[u], %[u], %[sw]\n\t"
                             "vsub.f32     %[u], %[u], %[y]\n\t"
                             "vstmia       %[g]!, {%[u]}\n\t"
                             "vmov         %[t], %[u]\n\t"
                             "bic          %[t], %[t], #0x80000000\n\t"
                             "cmp          %[t], %[amax]\n\t"
                             "it           hi\n\t"
                             "movhi        %[amax], %[t]\n\t"
                             "subs         %[n], %[n], #1\n\t"
                             "bne          1b"
                             : [g] "+r"(g), [w] "+r"(w), [n] "+r"(n), [amax] "+r"(amax), [t] "=&r"(t), [y] "=&t"(y),
                               [u] "=&t"(u)
                             : [mu] "t"(mu), [den] "t"(den), [lr] "t"(lr), [sw] "t"(s_w)
                             : "cc", "memory");
        }
        (void)k;
#else  /* !MT_FPU_ASM */
        for (k = 0; k < n; ++k) {
            const float gh = (mt_slot_get(&g[k]) - mu) / den;
            const float nw = (float)w[k] * s_w - lr * gh;
            const uint32_t a = mt_abs_bits_f32(nw);
            amax = a > amax ? a : amax;
            mt_slot_set(&g[k], nw);
        }
#endif /* MT_FPU_ASM */
    }
    memcpy(&f, &amax, 4);
    return f;
}

/* w[k] <- clamp(floor(g[k] / s_new + u), -127, 127), u = uniform01 of the stream (one draw each). */
static uint32_t row_requant(const int32_t *g, int8_t *w, int32_t n, float s_new, uint32_t x)
{
#if MT_FPU_ASM
    /*
     * floor is one VCVTR (the conversion that rounds by FPSCR's mode) with FPSCR switched to
     * round-toward-minus-infinity around it and back to the caller's mode (round to nearest) for
     * the division and the addition; VCVTR saturates, SSAT and a compare clamp to [-127, 127].
     */
    uint32_t rn, rm, t;
    float y, u;
    if (n < 1) {
        return x;
    }
    __asm__ volatile("vmrs %0, fpscr" : "=r"(rn));
    rm = (rn & ~(3u << 22)) | (2u << 22);
    __asm__ volatile("1:\n\t"
                     "vldmia        %[g]!, {%[y]}\n\t"
                     "vdiv.f32      %[y], %[y], %[s]\n\t"
                     "eor           %[x], %[x], %[x], lsl #13\n\t"
                     "eor           %[x], %[x], %[x], lsr #17\n\t"
                     "eor           %[x], %[x], %[x], lsl #5\n\t"
                     "lsr           %[t], %[x], #8\n\t"
                     "vmov          %[u], %[t]\n\t"
                     "vcvt.f32.s32  %[u], %[u], #24\n\t"
                     "vadd.f32      %[y], %[y], %[u]\n\t"
                     "vmsr          fpscr, %[rm]\n\t"
                     "vcvtr.s32.f32 %[y], %[y]\n\t"
                     "vmsr          fpscr, %[rn]\n\t"
                     "vmov          %[t], %[y]\n\t"
                     "ssat          %[t], #8, %[t]\n\t"
                     "cmn           %[t], #127\n\t"
                     "it            lt\n\t"
                     "mvnlt         %[t], #126\n\t"
                     "strb          %[t], [%[w]], #1\n\t"
                     "subs          %[n], %[n], #1\n\t"
                     "bne           1b"
                     : [g] "+r"(g), [w] "+r"(w), [n] "+r"(n), [x] "+r"(x), [t] "=&r"(t), [y] "=&t"(y), [u] "=&t"(u)
                     : [s] "t"(s_new), [rm] "r"(rm), [rn] "r"(rn)
                     : "cc", "memory");
    return x;
#else  /* !MT_FPU_ASM */
    int32_t k;
    for (k = 0; k < n; ++k) { /* mt_xorshift32_uniform01 inlined: next(), then (u >> 8) * 2^-24 */
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        w[k] = (int8_t)mt_floor_clamp127_f32(mt_slot_get(&g[k]) / s_new + mt_unit24_f32(x));
    }
    return x;
#endif /* MT_FPU_ASM */
}

/* The passes the driver calls: row_scale_sum etc. unless the including file names its own. */
#ifndef MT_UPD_ROW
#define MT_UPD_ROW(pass) row_##pass
#endif /* MT_UPD_ROW */

mt_status mt_fqt_upd_s8(const mt_fqt_upd_params *p,
                        int32_t channels,
                        int32_t per_channel,
                        int32_t *grad,
                        const int32_t *grad_bias,
                        const uint8_t *upd,
                        float *norm_mu,
                        float *norm_sd,
                        int8_t *norm_init,
                        int8_t *w,
                        float *s_w,
                        float *w_lo,
                        float *w_hi,
                        float *bias_step,
                        uint32_t *state)
{
    const float kk = (float)(per_channel + 1);
    const float an = p ? p->alpha_norm : 0.0f;
    const float keep_n = 1.0f - an;
    const float aw = p ? p->alpha_w : 0.0f;
    const float keep_w = 1.0f - aw;
    int32_t o;
    uint32_t x;
    if (!p || !grad || !grad_bias || !norm_mu || !norm_sd || !norm_init || !w || !s_w || !w_lo || !w_hi ||
        !bias_step || !state || channels < 1 || per_channel < 1) {
        return MT_ERR_ARG;
    }
    x = *state;
    for (o = 0; o < channels; ++o) {
        int32_t *g = grad + o * per_channel; /* consumed: real gradient, then the new real weights */
        int8_t *wr = w + o * per_channel;
        const float gb = mt_s64_to_f32(grad_bias[o]) * p->gb_scale;
        const float lr = p->lr;
        float sum, var, mu_b, sd_b, mu, sd, den, amax, lo32, hi32, am, s_new;
        bias_step[o] = 0.0f;
        if (upd && !upd[o]) {
            continue;
        }
        sum = MT_UPD_ROW(scale_sum)(g, per_channel, p->g_scale);
        sum += gb;
        mu_b = sum / kk;
        var = MT_UPD_ROW(sq_dev)(g, per_channel, mu_b);
        var += (gb - mu_b) * (gb - mu_b);
        sd_b = mt_sqrt_f32(var / kk);
        if (norm_init[o]) {
            mu = keep_n * norm_mu[o] + an * mu_b;
            sd = keep_n * norm_sd[o] + an * sd_b;
        } else {
            mu = mu_b;
            sd = sd_b;
        }
        norm_mu[o] = mu;
        norm_sd[o] = sd;
        norm_init[o] = 1;
        den = sd + 1e-12f;
        amax = MT_UPD_ROW(step)(g, wr, per_channel, s_w[o], lr, mu, den, sd == 0.0f);
        bias_step[o] = sd == 0.0f ? 0.0f : lr * ((gb - mu) / den);
        w_lo[o] = keep_w * w_lo[o] + aw * -amax;
        w_hi[o] = keep_w * w_hi[o] + aw * amax;
        lo32 = w_lo[o] < 0.0f ? w_lo[o] : 0.0f;
        hi32 = w_hi[o] > 0.0f ? w_hi[o] : 0.0f;
        am = -lo32 > hi32 ? -lo32 : hi32;
        s_new = am / 127.0f;
        if (am == 0.0f) {
            s_new = mt_pow2_f32(-20);
        } else if (s_new < mt_pow2_f32(-126)) {
            s_new = mt_pow2_f32(-126);
        }
        x = MT_UPD_ROW(requant)(g, wr, per_channel, s_new, x); /* requantize with the new scale */
        s_w[o] = s_new;
    }
    *state = x;
    return MT_OK;
}

#endif /* MT_FQT_UPD_S8_REF_H */
