/*
 * What both mt_add_fwd_s8_tflite files share (nn/mt_add_fwd_s8_tflite.c, the reference, and
 * dsp/mt_add_fwd_s8_tflite.c, its DSP twin): the argument check and the reference body, always
 * inline, which the twin runs where its prepared form does not apply, so both builds share one
 * definition of the result.
 */
#ifndef MT_ADD_FWD_S8_TFLITE_REF_H
#define MT_ADD_FWD_S8_TFLITE_REF_H

#include "mt_fixedpoint.h"
#include "mt_nn.h"

/* MT_ERR_ARG unless mt_add_fwd_s8_tflite's arguments are valid (multipliers >= 0, shifts in [-31, 0]). */
MT_INLINE mt_status mt_add_fwd_s8_tflite_check(const mt_add_tflite_params *p, int32_t size, const int8_t *a,
                                               const int8_t *b, const int8_t *output)
{
    if (!p || !a || !b || !output || size < 1 || p->a_multiplier < 0 || p->b_multiplier < 0 ||
        p->output_multiplier < 0 || p->a_shift > 0 || p->b_shift > 0 || p->output_shift > 0 ||
        p->a_shift < -31 || p->b_shift < -31 || p->output_shift < -31) {
        return MT_ERR_ARG;
    }
    return MT_OK;
}

/* mt_add_fwd_s8_tflite with checked arguments: TFLite's three requantizations per element. */
MT_INLINE void mt_add_fwd_s8_tflite_ref(const mt_add_tflite_params *p, int32_t size, const int8_t *a,
                                        const int8_t *b, int8_t *output)
{
    int32_t i;
    for (i = 0; i < size; i++) {
        /* NOTE: |a - z_a| <= 255: (a - z_a) * 2^20 < 2^28; multipliers <= 0.5: the sum < 2^28 */
        const int32_t xa = mt_multiply_by_quantized_multiplier(((int32_t)a[i] - p->a_zero_point) * (1 << 20),
                                                               p->a_multiplier, p->a_shift);
        const int32_t xb = mt_multiply_by_quantized_multiplier(((int32_t)b[i] - p->b_zero_point) * (1 << 20),
                                                               p->b_multiplier, p->b_shift);
        output[i] = mt_requantize_tflite(xa + xb, p->output_multiplier, p->output_shift, p->output_zero_point,
                                         p->act_min, p->act_max);
    }
}

#endif /* MT_ADD_FWD_S8_TFLITE_REF_H */
