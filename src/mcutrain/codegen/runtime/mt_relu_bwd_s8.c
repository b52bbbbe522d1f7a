/* ReLU / ReLU6 mask of int8 errors (Python twin: fqt.FQT._mask): keep where lo < y (and y < hi). */
#include "mt_fqt.h"

mt_status mt_relu_bwd_s8(int32_t size, int32_t lo, int32_t hi, const int8_t *y, const int8_t *e_in,
                         int8_t *e_out)
{
    int32_t i;
    if (!y || !e_in || !e_out || size < 0) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; ++i) {
        const int32_t keep = y[i] > lo && (hi > 127 || y[i] < hi);
        e_out[i] = keep ? e_in[i] : 0;
    }
    return MT_OK;
}
