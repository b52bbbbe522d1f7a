/* ReLU / ReLU6 mask of float32 errors on uint8 outputs (Python twin: fqt.FQT._mask, precision mixed). */
#include "mt_fqt.h"

mt_status mt_relu_bwd_u8_f32(int32_t size, int32_t lo, int32_t hi, const uint8_t *y, const float *e_in,
                             float *e_out)
{
    int32_t i;
    if (!y || !e_in || !e_out || size < 0) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; ++i) {
        const int32_t keep = y[i] > lo && (hi > 255 || y[i] < hi);
        e_out[i] = keep ? e_in[i] : 0.0f;
    }
    return MT_OK;
}
