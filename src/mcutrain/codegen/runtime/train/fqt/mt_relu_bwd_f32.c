/* ReLU / ReLU6 mask of float32 errors on float32 outputs (Python twin: fqt.FQT._mask, precision float32). */
#include "mt_fqt.h"

mt_status mt_relu_bwd_f32(int32_t size, int32_t act, const float *y, const float *e_in, float *e_out)
{
    int32_t i;
    if (!y || !e_in || !e_out || size < 0 || act < 1 || act > 2) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; ++i) {
        const int32_t keep = y[i] > 0.0f && (act == 1 || y[i] < 6.0f);
        e_out[i] = keep ? e_in[i] : 0.0f;
    }
    return MT_OK;
}
