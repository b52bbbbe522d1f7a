/*
 * Dynamic partial updates on float32 errors (Python twins: methods.partial.magnitudes and
 * top_k_mask): per channel the float32 sum of |e| over the rows in order from +0.0, the k largest
 * kept (ties to the lower index, as a stable sort), the others' errors set to 0.
 *
 * The sums run four channels at a time down the rows (each channel's own order unchanged). Without
 * an FPU a zero error is not added: the sum of |e| is >= +0.0, and s + 0.0 = s exactly, so this
 * only skips the software addition. The sums are ranked by their bit patterns as int32 (for
 * floats >= +0.0 the same order; NaN, last in numpy's sort, as -1) by mt_fqt_topk_select.
 */
#include <string.h>

#include "mt_fqt.h"
#include "mt_fqt_keep.h"

#if defined(__ARM_FP)
#define TOPK_ADD(s, v) ((s) += (v))
#else  /* !defined(__ARM_FP) */
#define TOPK_ADD(s, v) ((v) != 0.0f ? (void)((s) += (v)) : (void)0)
#endif /* __ARM_FP */

/* |v| (+0.0 for -0.0; either adds the same to a sum >= +0.0): VABS / one bit cleared under GCC. */
#if defined(__GNUC__)
#define topk_abs(v) __builtin_fabsf(v)
#else  /* !defined(__GNUC__) */
static float topk_abs(float v)
{
    return v < 0.0f ? -v : v;
}
#endif /* __GNUC__ */

mt_status mt_fqt_topk_f32(int32_t rows, int32_t channels, int32_t k, float *e, float *scratch, int32_t *list,
                          uint8_t *mask, int32_t *kept)
{
    int32_t p, c;
    if (!e || !scratch || !list || !mask || !kept || channels < 1 || rows < 0) {
        return MT_ERR_ARG;
    }
    for (c = 0; c + 4 <= channels; c += 4) {
        float m0 = 0.0f, m1 = 0.0f, m2 = 0.0f, m3 = 0.0f;
        const float *q = e + c;
        for (p = 0; p < rows; ++p, q += channels) {
            TOPK_ADD(m0, topk_abs(q[0]));
            TOPK_ADD(m1, topk_abs(q[1]));
            TOPK_ADD(m2, topk_abs(q[2]));
            TOPK_ADD(m3, topk_abs(q[3]));
        }
        scratch[c] = m0;
        scratch[c + 1] = m1;
        scratch[c + 2] = m2;
        scratch[c + 3] = m3;
    }
    for (; c < channels; ++c) {
        float m = 0.0f;
        const float *q = e + c;
        for (p = 0; p < rows; ++p, q += channels) {
            TOPK_ADD(m, topk_abs(*q));
        }
        scratch[c] = m;
    }
    for (c = 0; c < channels; ++c) {
        uint32_t bits;
        memcpy(&bits, &scratch[c], 4);
        list[c] = bits > 0x7F800000u ? -1 : (int32_t)bits;
    }
    *kept = mt_fqt_topk_select(channels, k < 0 ? 0 : (k > channels ? channels : k), list, mask);
    for (c = 0; c < channels; ++c) {
        if (!mask[c]) {
            float *q = e + c;
            for (p = 0; p + 2 <= rows; p += 2, q += 2 * channels) {
                q[0] = 0.0f;
                q[channels] = 0.0f;
            }
            if (p < rows) {
                *q = 0.0f;
            }
        }
    }
    return MT_OK;
}
