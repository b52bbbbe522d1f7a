/* ReLU / ReLU6 mask of uint8 errors (Python twin: fqt.FQT._mask): outside the mask the error is its
   zero point (a centred 0). */
#include "mt_fqt.h"

mt_status mt_relu_bwd_u8(int32_t size, int32_t lo, int32_t hi, const uint8_t *y, int32_t e_zero_point,
                         const uint8_t *e_in, uint8_t *e_out)
{
    int32_t i;
    if (!y || !e_in || !e_out || size < 0) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; ++i) {
        const int32_t keep = y[i] > lo && (hi > 255 || y[i] < hi);
        e_out[i] = keep ? e_in[i] : (uint8_t)e_zero_point;
    }
    return MT_OK;
}
