/*
 * mcutrain runtime: mt_add_fwd_s8_tflite, TFLite's int8 ADD (see mt_nn.h). Reads a[i] and b[i]
 * before writing output[i], so it may run in place.
 */
#include "mt_fixedpoint.h"
#include "mt_nn.h"

mt_status mt_add_fwd_s8_tflite(const mt_add_tflite_params *params,
                               int32_t size,
                               const int8_t *a,
                               const int8_t *b,
                               int8_t *output)
{
    const mt_add_tflite_params *p = params;
    int32_t i;
    if (!p || !a || !b || !output || size < 1 || p->a_multiplier < 0 || p->b_multiplier < 0 ||
        p->output_multiplier < 0 || p->a_shift > 0 || p->b_shift > 0 || p->output_shift > 0 || p->a_shift < -31 ||
        p->b_shift < -31 || p->output_shift < -31) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        /* NOTE: |a - z_a| <= 255: (a - z_a) * 2^20 < 2^28; multipliers <= 0.5: the sum < 2^28 */
        const int32_t xa = mt_multiply_by_quantized_multiplier(((int32_t)a[i] - p->a_zero_point) * (1 << 20),
                                                               p->a_multiplier, p->a_shift);
        const int32_t xb = mt_multiply_by_quantized_multiplier(((int32_t)b[i] - p->b_zero_point) * (1 << 20),
                                                               p->b_multiplier, p->b_shift);
        output[i] = mt_requantize_tflite(xa + xb, p->output_multiplier, p->output_shift, p->output_zero_point,
                                         p->act_min, p->act_max);
    }
    return MT_OK;
}
