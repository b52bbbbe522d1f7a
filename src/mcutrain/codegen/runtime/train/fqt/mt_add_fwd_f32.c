/*
 * float32 residual add, precision float32 (Python twin: fqt.FQT._fwd_add on float32 and act_f32):
 * y = act(a + b), act 0 none, 1 relu (z < 0 ? 0 : z), 2 relu6 (also 6 above). In place allowed.
 */
#include "mt_fqt.h"

mt_status mt_add_fwd_f32(int32_t size, int32_t act, const float *a, const float *b, float *output)
{
    int32_t i;
    if (!a || !b || !output || size < 1 || act < 0 || act > 2) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        float z = a[i] + b[i];
        if (act != 0) {
            z = z < 0.0f ? 0.0f : z;
            z = (act == 2 && z > 6.0f) ? 6.0f : z;
        }
        output[i] = z;
    }
    return MT_OK;
}
