/*
 * The FQT int8 in-place update of one layer in fixed point (docs/integer-semantics.md 13.9; Python
 * twin: methods/fqt_update_int.integer_update). Every per-weight operation is an int32 one, so a
 * core without an FPU (Cortex-M0+, RV32IMC) calls no soft-float routine per weight; float32 is
 * left to a few operations per channel (statistics, scales), in the order of the Python twin.
 * Per updated channel, four passes over its K weights (n = K + 1, the bias last):
 *   1. sh = max(bitlen(max |G|, |gbu|) - 15, 0): Gs = shift_round(G, sh), |Gs| <= 2^15
 *   2. S = sum Gs, Q = sum Gs^2 (|S| < 2^31 for n <= 65535, Q in uint64), V = n Q - S^2 >= 0
 *   3. z = (w << 16) - shift_round(Gs * beta_m, beta_s) + gamma_q (Q16; |z| < 2^23 + 2^30)
 *   4. w' = clamp((v * rho_m + (u >> (32 - n))) >> n, -127, 127), v = shift_round(z, t), |v| <= 2^16
 * shift_round(x, s) = floor(x / 2^s + 1/2) (round half up). No negative value is shifted
 * (docs/integer-semantics.md 11): a floor shift of a signed x is one of x + 2^31 as uint32, the
 * offset 2^(31 - s) taken back afterwards (or folded into a per-row constant, modulo 2^32).
 * The int32 gradient buffer (consumed) holds Gs, then z.
 */
#include <string.h>

#include "mt_fqt.h"
#include "mt_fqt_math.h"
#include "mt_train.h"

#define MT_UPD_GRAD_BITS 15
#define MT_UPD_MANT 14
#define MT_UPD_FRAC 16
#define MT_UPD_V_BITS 16
#define MT_UPD_MAX_ROW 65535
#define MT_UPD_GAMMA_MAX 536870912 /* 2^29 */

/* Bits of v (0 for 0): per channel only. */
static int32_t bit_length_u32(uint32_t v)
{
    int32_t n = 0;
    while (v != 0u) {
        ++n;
        v >>= 1;
    }
    return n;
}

static uint32_t abs_u32(int32_t v)
{
    return v < 0 ? (uint32_t)0 - (uint32_t)v : (uint32_t)v;
}

#define MT_BIAS31 0x80000000u

/* floor(x / 2^s + 1/2) for s in [0, 31] and |x| < 2^(s + 30): (floor(x / 2^(s-1)) + 1) >> 1, unsigned. */
static int32_t shift_round(int32_t x, int32_t s)
{
    uint32_t b;
    if (s == 0) {
        return x;
    }
    b = ((((uint32_t)x ^ MT_BIAS31) >> (s - 1)) + 1u) >> 1; /* = floor(x / 2^s + 1/2) + 2^(31 - s) */
    return (int32_t)b - (int32_t)(MT_BIAS31 >> s);
}

/* An integral float32 clamped to [-bound, bound] (inf saturates, NaN is 0): the twin's sat_i32. */
static int32_t sat_integral_f32(float q, int32_t bound)
{
    if (!(q == q)) {
        return 0;
    }
    if (q >= (float)bound) {
        return bound;
    }
    if (q <= -(float)bound) {
        return -bound;
    }
    return (int32_t)q;
}

/*
 * (m, e) with y ~= m * 2^-e: m = round_half_up(f * 2^14) in [2^13, 2^14] for y = f * 2^x, f in
 * [0.5, 1), e = 14 - x; (0, 0) below 2^-126 (zero, subnormal), and for NaN; (2^14, -128) for +inf.
 * From the bits (y >= 0): f = m24 * 2^-24 with m24 the significand, x = E - 126.
 */
static void mant14(float y, int32_t *m, int32_t *e)
{
    uint32_t bits;
    uint32_t ex;
    memcpy(&bits, &y, 4);
    ex = (bits >> 23) & 0xFFu;
    if (ex == 0u || (bits >> 31) != 0u) {
        *m = 0;
        *e = 0;
    } else if (ex == 0xFFu) {
        *m = (bits & 0x7FFFFFu) == 0u ? 1 << MT_UPD_MANT : 0;
        *e = (bits & 0x7FFFFFu) == 0u ? -128 : 0;
    } else {
        *m = (int32_t)((((bits & 0x7FFFFFu) | 0x800000u) + 512u) >> 10);
        *e = MT_UPD_MANT - ((int32_t)ex - 126);
    }
}

/* Pass 1: bitwise OR of every |G| (its bit length is that of the largest). */
static uint32_t row_abs_or(const int32_t *g, int32_t n)
{
    uint32_t acc = 0u;
    int32_t k;
    for (k = 0; k < n; ++k) {
        acc |= abs_u32(g[k]);
    }
    return acc;
}

/* Pass 2: g[k] <- Gs = shift_round(G, sh); returns sum Gs, *q = sum Gs^2 (Gs^2 <= 2^30 each). */
static int32_t row_shift_sums(int32_t *g, int32_t n, int32_t sh, uint64_t *q)
{
    int32_t sum = 0; /* |sum| <= 65534 * 2^15 < 2^31 */
    uint64_t sq = 0u;
    int32_t k;
    if (sh == 0) {
        for (k = 0; k < n; ++k) {
            const int32_t v = g[k];
            sum += v;
            sq += (uint32_t)(v * v);
        }
    } else {
        const int32_t off = (int32_t)(MT_BIAS31 >> sh);
        for (k = 0; k < n; ++k) {
            const int32_t v = (int32_t)(((((uint32_t)g[k] ^ MT_BIAS31) >> (sh - 1)) + 1u) >> 1) - off;
            g[k] = v;
            sum += v;
            sq += (uint32_t)(v * v);
        }
    }
    *q = sq;
    return sum;
}

/* Pass 3: g[k] <- z = (w << 16) - shift_round(Gs * bm, bs) + gamma_q; returns max |z|. */
static uint32_t row_step(int32_t *g, const int8_t *w, int32_t n, int32_t bm, int32_t bs, int32_t gamma_q)
{
    uint32_t amax = 0u;
    int32_t k;
    if (bs == 0) {
        for (k = 0; k < n; ++k) {
            const int32_t z = (int32_t)w[k] * 65536 - g[k] * bm + gamma_q;
            const uint32_t a = abs_u32(z);
            g[k] = z;
            amax = a > amax ? a : amax;
        }
    } else {
        /* (x + 2^31 + 2^(bs-1)) >> bs = shift_round(x, bs) + 2^(31-bs) (|x| <= 2^29: below 2^32) */
        const uint32_t half = MT_BIAS31 + (1u << (bs - 1));
        const int32_t g_off = gamma_q + (int32_t)(MT_BIAS31 >> bs); /* <= 2^29 + 2^30 */
        for (k = 0; k < n; ++k) {
            const int32_t z = (int32_t)w[k] * 65536 - (int32_t)(((uint32_t)(g[k] * bm) + half) >> bs) + g_off;
            const uint32_t a = abs_u32(z);
            g[k] = z;
            amax = a > amax ? a : amax;
        }
    }
    return amax;
}

/*
 * Pass 4: w[k] <- clamp((shift_round(z, t) * rm + (u >> (32 - ns))) >> ns, -127, 127), one draw each.
 * Unsigned throughout: vb = (z + off) >> t is v + 2^(31-t) (t >= 1; off = 2^31 + 2^(t-1)) or z (t = 0),
 * so vb * rm + kk is v * rm + 2^31 modulo 2^32 (kk = 2^31 - 2^(31-t) rm), a value in [2^30, 2^32):
 * |v rm| <= 2^30 and u >> (32 - ns) < 2^30 beside it. Its >> ns is w' + 2^(31-ns).
 */
static uint32_t row_requant(const int32_t *g, int8_t *w, int32_t n, int32_t t, int32_t rm, int32_t ns, uint32_t x)
{
    const int32_t ushift = 32 - ns; /* ns in [1, 30] */
    const uint32_t off = t > 0 ? MT_BIAS31 + (1u << (t - 1)) : 0u;
    const uint32_t kk = t > 0 ? MT_BIAS31 - (MT_BIAS31 >> t) * (uint32_t)rm : MT_BIAS31;
    const int32_t lo = (int32_t)(MT_BIAS31 >> ns) - 127; /* the clamp, offset by 2^(31-ns) */
    const int32_t hi = (int32_t)(MT_BIAS31 >> ns) + 127;
    int32_t k;
    for (k = 0; k < n; ++k) {
        const uint32_t vb = ((uint32_t)g[k] + off) >> t;
        int32_t q;
        x ^= x << 13; /* mt_xorshift32 inlined: next() */
        x ^= x >> 17;
        x ^= x << 5;
        q = (int32_t)((vb * (uint32_t)rm + kk + (x >> ushift)) >> ns);
        w[k] = (int8_t)((q > hi ? hi : (q < lo ? lo : q)) - (hi - 127));
    }
    return x;
}

mt_status mt_fqt_upd_s8_int(const mt_fqt_upd_params *p,
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
    const int32_t n = per_channel + 1;
    const float nf = (float)n;
    const float an = p ? p->alpha_norm : 0.0f;
    const float keep_n = 1.0f - an;
    const float aw = p ? p->alpha_w : 0.0f;
    const float keep_w = 1.0f - aw;
    int32_t o;
    uint32_t x;
    if (!p || !grad || !grad_bias || !norm_mu || !norm_sd || !norm_init || !w || !s_w || !w_lo || !w_hi ||
        !bias_step || !state || channels < 1 || per_channel < 1 || n > MT_UPD_MAX_ROW) {
        return MT_ERR_ARG;
    }
    x = *state;
    for (o = 0; o < channels; ++o) {
        int32_t *g = grad + o * per_channel; /* consumed: Gs, then the new weights z */
        int8_t *wr = w + o * per_channel;
        const float gb = mt_s64_to_f32(grad_bias[o]) * p->gb_scale;
        const float lr = p->lr;
        int32_t gbu, gbs, sh, s, bm, be, bs, gamma_q, t, rm, ns;
        uint64_t q;
        int64_t v;
        uint32_t amax;
        float unit, mu_b, sd_b, mu, sd, den, beta, gamma, amax_r, lo32, hi32, am, s_new;
        bias_step[o] = 0.0f;
        if (upd && !upd[o]) {
            continue;
        }
        gbu = sat_integral_f32(mt_round_half_away_inline_f32(gb / p->g_scale), 2147483647);
        sh = bit_length_u32(row_abs_or(g, per_channel) | abs_u32(gbu)) - MT_UPD_GRAD_BITS;
        sh = sh > 0 ? sh : 0;
        gbs = shift_round(gbu, sh);
        s = row_shift_sums(g, per_channel, sh, &q) + gbs;
        q += (uint64_t)(uint32_t)(gbs * gbs);
        v = (int64_t)n * (int64_t)q - (int64_t)s * (int64_t)s; /* n Q < 2^62 */
        unit = p->g_scale * mt_pow2_f32(sh);
        mu_b = mt_s64_to_f32(s) / nf * unit;
        sd_b = mt_sqrt_f32(mt_s64_to_f32(v)) / nf * unit;
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
        if (sd != 0.0f) {
            bias_step[o] = lr * ((gb - mu) / den);
            beta = lr * unit / den / s_w[o];
            gamma = lr * mu / den / s_w[o];
        } else {
            beta = 0.0f;
            gamma = 0.0f;
        }
        gamma_q = sat_integral_f32(mt_round_half_away_inline_f32(gamma * 65536.0f), MT_UPD_GAMMA_MAX);
        mant14(beta, &bm, &be);
        bs = be - MT_UPD_FRAC;
        if (bm == 0) { /* no step */
            bs = 0;
        } else if (bs < 0) { /* a step of 2^13 weight steps or more saturates */
            bm = 1 << MT_UPD_MANT;
            bs = 0;
        } else if (bs > 31) { /* |Gs * bm| < 2^29: every shift past 30 gives 0 */
            bs = 31;
        }
        amax = row_step(g, wr, per_channel, bm, bs, gamma_q);
        amax_r = mt_s64_to_f32((int64_t)amax) * s_w[o] * mt_pow2_f32(-MT_UPD_FRAC);
        w_lo[o] = keep_w * w_lo[o] + aw * -amax_r;
        w_hi[o] = keep_w * w_hi[o] + aw * amax_r;
        lo32 = w_lo[o] < 0.0f ? w_lo[o] : 0.0f;
        hi32 = w_hi[o] > 0.0f ? w_hi[o] : 0.0f;
        am = -lo32 > hi32 ? -lo32 : hi32;
        s_new = am / 127.0f;
        if (am == 0.0f) {
            s_new = mt_pow2_f32(-20);
        } else if (s_new < mt_pow2_f32(-126)) {
            s_new = mt_pow2_f32(-126);
        }
        t = bit_length_u32(amax) - MT_UPD_V_BITS;
        t = t > 0 ? t : 0;
        mant14((s_w[o] / s_new) * mt_pow2_f32(t - MT_UPD_FRAC), &rm, &ns);
        if (ns < 1) { /* rho_m 0 (rho below 2^-126) keeps 0; a larger rho saturates */
            rm = rm == 0 ? 0 : 1 << MT_UPD_MANT;
            ns = 1;
        } else if (ns > 30) {
            rm >>= ns - 30 < MT_UPD_MANT + 1 ? ns - 30 : MT_UPD_MANT + 1;
            ns = 30;
        }
        x = row_requant(g, wr, per_channel, t, rm, ns, x);
        s_w[o] = s_new;
    }
    *state = x;
    return MT_OK;
}
