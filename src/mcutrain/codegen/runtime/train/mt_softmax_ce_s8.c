/*
 * Integer softmax cross-entropy (docs/integer-semantics.md section 9; Python twin
 * quant/loss.py int_softmax_cross_entropy): loss Q16 and error p - onehot Q24 from int8 logits,
 * with int64 additions, multiplications, shifts and divisions only. Every shifted or divided
 * value is non-negative, so C's shifts and truncating division are the floors of the spec.
 */
#include <string.h>

#include "mt_train.h"

#define MT_LOG2E_Q30 1549082005LL /* round(log2(e) * 2^30) */
#define MT_LN2_Q30 744261118LL    /* round(ln(2) * 2^30) */
#define MT_GAP_MAX 2147483647LL   /* gaps saturate at 128 (Q24) */
#define MT_MAX_CLASSES 65536

/* 2^30 / i!, i = 0..11 */
static const int64_t mt_exp_c[12] = {1073741824, 1073741824, 536870912, 178956971, 44739243, 8947849,
                                     1491308,    213044,     26631,     2959,      296,      27};
/* 2^30 / (2i + 1), i = 0..8 */
static const int64_t mt_atanh_c[9] = {1073741824, 357913941, 214748365, 153391689, 119304647,
                                      97612893,   82595525,  71582788,  63161284};

/* s = m * 2^(e - 31) exactly, m in [2^30, 2^31) (frexp of a float32, subnormals included). */
static int mt_scale_fixed(float scale, int64_t *m, int32_t *e)
{
    uint32_t bits;
    uint32_t expo;
    uint32_t frac;
    memcpy(&bits, &scale, 4);
    expo = (bits >> 23) & 0xFFu;
    frac = bits & 0x7FFFFFu;
    if ((bits >> 31) != 0u || expo == 0xFFu || (expo == 0u && frac == 0u)) {
        return 0; /* negative, zero, inf or NaN */
    }
    if (expo != 0u) {
        *m = (int64_t)(0x800000u | frac) << 7;
        *e = (int32_t)expo - 126;
    } else {
        int32_t k = 0;
        while ((frac & 0x800000u) == 0u) {
            frac <<= 1;
            ++k;
        }
        *m = (int64_t)frac << 7;
        *e = -125 - k;
    }
    return 1;
}

static int64_t mt_horner_q30(const int64_t *c, int32_t last, int64_t x)
{
    int64_t acc = c[last];
    int32_t i;
    for (i = last - 1; i >= 0; --i) {
        acc = c[i] + ((acc * x + (1LL << 29)) >> 30); /* acc, x >= 0; acc * x < 2^62 */
    }
    return acc;
}

/* exp(-g / 2^24) in Q30 for g in [0, 2^31) (step 2). */
static int64_t mt_exp_neg_q30(int64_t g)
{
    const int64_t y = (g * MT_LOG2E_Q30 + (1LL << 23)) >> 24;
    const int64_t k = y >> 30;
    const int64_t f = y & ((1LL << 30) - 1);
    int64_t poly;
    if (k >= 32) {
        return 0;
    }
    if (f == 0) {
        poly = 1LL << 31;
    } else {
        const int64_t u = (((1LL << 30) - f) * MT_LN2_Q30 + (1LL << 29)) >> 30;
        poly = mt_horner_q30(mt_exp_c, 11, u);
    }
    return (poly + (1LL << k)) >> (k + 1);
}

/* ln(S / 2^30) in Q30 for S in [2^30, 2^53) (step 5). */
static int64_t mt_log_q30(int64_t s)
{
    int32_t top = 0;
    int32_t j;
    int64_t w;
    int64_t den;
    int64_t z;
    int64_t z2;
    while ((s >> (top + 1)) != 0) {
        ++top; /* floor(log2 S) */
    }
    j = top - 30;
    w = s - (1LL << top);
    if (j > 0) {
        w = (w + (1LL << (j - 1))) >> j;
    }
    den = (1LL << 31) + w;
    z = ((w << 30) + den / 2) / den;
    z2 = (z * z + (1LL << 29)) >> 30;
    return (int64_t)j * MT_LN2_Q30 + ((z * mt_horner_q30(mt_atanh_c, 8, z2) + (1LL << 28)) >> 29);
}

/* Gap g_k = s * d in Q24, saturated (step 1). */
static int64_t mt_gap_q24(int32_t d, int64_t m, int32_t e)
{
    const int64_t p = (int64_t)d * m; /* < 2^39 */
    const int32_t n = 7 - e;
    int64_t g;
    if (n >= 1) {
        const int32_t nn = n < 62 ? n : 62;
        g = (p + (1LL << (nn - 1))) >> nn;
    } else {
        g = p << (-n < 2 ? -n : 2);
    }
    return g < MT_GAP_MAX ? g : MT_GAP_MAX;
}

mt_status mt_softmax_ce_s8(int32_t batch,
                           int32_t classes,
                           const int8_t *logits,
                           float scale,
                           const int32_t *labels,
                           int32_t *loss,
                           int32_t *err)
{
    int64_t m;
    int32_t e;
    int32_t b;
    if (logits == NULL || labels == NULL || batch < 1 || classes < 1 || classes > MT_MAX_CLASSES ||
        !mt_scale_fixed(scale, &m, &e)) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        if (labels[b] < 0 || labels[b] >= classes) {
            return MT_ERR_ARG;
        }
    }
    for (b = 0; b < batch; ++b) {
        const int8_t *q = logits + (int64_t)b * classes;
        const int32_t label = labels[b];
        int32_t qmax = q[0];
        int64_t total = 0;
        int32_t k;
        for (k = 1; k < classes; ++k) {
            qmax = q[k] > qmax ? q[k] : qmax;
        }
        for (k = 0; k < classes; ++k) {
            total += mt_exp_neg_q30(mt_gap_q24(qmax - q[k], m, e)); /* S < 2^47 */
        }
        if (err != NULL) {
            int32_t *row = err + (int64_t)b * classes;
            for (k = 0; k < classes; ++k) {
                const int64_t ek = mt_exp_neg_q30(mt_gap_q24(qmax - q[k], m, e));
                const int64_t p = ((ek << 24) + total / 2) / total;
                row[k] = (int32_t)(p - (k == label ? (1LL << 24) : 0));
            }
        }
        if (loss != NULL) {
            const int64_t lse = mt_log_q30(total);
            const int64_t g = mt_gap_q24(qmax - q[label], m, e);
            loss[b] = (int32_t)((lse + (g << 6) + (1LL << 13)) >> 14);
        }
    }
    return MT_OK;
}
