/*
 * ReLU / ReLU6 mask of int8 errors (Python twin: fqt.FQT._mask): keep where lo < y (and y < hi).
 * Reference kernel; dsp/mt_relu_bwd_s8.c is its DSP twin (four elements per word).
 */
#include "mt_fqt.h"
#include "mt_relu_bwd_s8_ref.h"

mt_status mt_relu_bwd_s8(int32_t size, int32_t lo, int32_t hi, const int8_t *y, const int8_t *e_in,
                         int8_t *e_out)
{
    if (!y || !e_in || !e_out || size < 0) {
        return MT_ERR_ARG;
    }
    mt_relu_bwd_s8_ref(0, size, lo, hi, y, e_in, e_out);
    return MT_OK;
}
