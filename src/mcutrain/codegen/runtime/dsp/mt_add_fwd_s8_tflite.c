/*
 * mcutrain runtime: mt_add_fwd_s8_tflite, TFLite's int8 ADD (see mt_nn.h). Reads a[i] and b[i]
 * before writing output[i], so it may run in place.
 *
 * DSP twin of nn/mt_add_fwd_s8_tflite.c, bit-exact with it: the three requantizations take their
 * prepared form (mt_mbqm_fast_tflite: its operands here stay below 2^28) when every multiplier is
 * in [2^30, 2^31), which the exporter's multipliers always are; the reference body
 * (mt_add_fwd_s8_tflite_ref.h) otherwise, and on a core without DSP.
 */
#include "mt_add_fwd_s8_tflite_ref.h"
#include "mt_fixedpoint.h"
#include "mt_nn.h"

#if MT_DSP
/* The prepared form of one of the ADD's multipliers (mt_mbqm_fast_tflite's constants). */
typedef struct {
    int32_t m2, r, half, mask;
} mbqm_prep;

static mbqm_prep mbqm_prepare(int32_t multiplier, int32_t shift)
{
    mbqm_prep q;
    q.m2 = mt_requant_mult_tflite(multiplier);
    q.r = -shift;
    q.half = (int32_t)(((uint32_t)1 << q.r) >> 1);
    q.mask = q.r > 0 ? -1 : 0;
    return q;
}

static void add_fast(const mt_add_tflite_params *p, int32_t size, const int8_t *a, const int8_t *b, int8_t *output)
{
    const mbqm_prep qa = mbqm_prepare(p->a_multiplier, p->a_shift);
    const mbqm_prep qb = mbqm_prepare(p->b_multiplier, p->b_shift);
    const mbqm_prep qy = mbqm_prepare(p->output_multiplier, p->output_shift);
    const int32_t lo = p->act_min - p->output_zero_point, hi = p->act_max - p->output_zero_point;
    int32_t i;
    for (i = 0; i < size; i++) {
        /* NOTE: |a - z_a| * 2^20 < 2^28, and so are the scaled terms' sum (multipliers <= 0.5) */
        const int32_t xa = mt_mbqm_fast_tflite(((int32_t)a[i] - p->a_zero_point) * (1 << 20), qa.m2, qa.r, qa.half,
                                               qa.mask);
        const int32_t xb = mt_mbqm_fast_tflite(((int32_t)b[i] - p->b_zero_point) * (1 << 20), qb.m2, qb.r, qb.half,
                                               qb.mask);
        int32_t y = mt_mbqm_fast_tflite(xa + xb, qy.m2, qy.r, qy.half, qy.mask);
        y = y < lo ? lo : (y > hi ? hi : y);
        output[i] = (int8_t)(y + p->output_zero_point);
    }
}
#endif /* MT_DSP */

mt_status mt_add_fwd_s8_tflite(const mt_add_tflite_params *params,
                               int32_t size,
                               const int8_t *a,
                               const int8_t *b,
                               int8_t *output)
{
    const mt_add_tflite_params *p = params;
    if (mt_add_fwd_s8_tflite_check(p, size, a, b, output) != MT_OK) {
        return MT_ERR_ARG;
    }
#if MT_DSP
    if (p->a_multiplier >= (1 << 30) && p->b_multiplier >= (1 << 30) && p->output_multiplier >= (1 << 30)) {
        add_fast(p, size, a, b, output);
        return MT_OK;
    }
#endif /* MT_DSP */
    mt_add_fwd_s8_tflite_ref(p, size, a, b, output);
    return MT_OK;
}
