/*
 * mcutrain runtime: mt_add_fwd_s8, the residual add (see mt_nn.h). Reads a[i] and b[i] before
 * writing output[i], so it may run in place.
 */
#include "mt_fixedpoint.h"
#include "mt_nn.h"

mt_status mt_add_fwd_s8(const mt_add_params *params, int32_t size, const int8_t *a, const int8_t *b, int8_t *output)
{
    const mt_add_params *p = params;
    int32_t i;
    if (!p || !a || !b || !output || size < 1 || p->right_shift < 1 || p->right_shift > 62 ||
        p->a_multiplier < 0 || p->b_multiplier < 0) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        /* NOTE: |a - z_a| <= 255 and Ma, Mb < 2^31: |t| < 2^40, far inside int64 */
        const int64_t t = (int64_t)((int32_t)a[i] - p->a_zero_point) * p->a_multiplier +
                          (int64_t)((int32_t)b[i] - p->b_zero_point) * p->b_multiplier;
        int64_t y = p->output_zero_point + mt_rounding_shift_right_s64(t, p->right_shift);
        y = y < p->act_min ? p->act_min : y;
        y = y > p->act_max ? p->act_max : y;
        output[i] = (int8_t)y;
    }
    return MT_OK;
}
