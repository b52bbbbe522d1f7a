/*
 * mcutrain runtime: mt_add_fwd_s8_tflite, TFLite's int8 ADD (see mt_nn.h). Reads a[i] and b[i]
 * before writing output[i], so it may run in place.
 *
 * Reference kernel (mt_add_fwd_s8_tflite_ref.h); dsp/mt_add_fwd_s8_tflite.c is its DSP twin.
 */
#include "mt_add_fwd_s8_tflite_ref.h"
#include "mt_nn.h"

mt_status mt_add_fwd_s8_tflite(const mt_add_tflite_params *params,
                               int32_t size,
                               const int8_t *a,
                               const int8_t *b,
                               int8_t *output)
{
    if (mt_add_fwd_s8_tflite_check(params, size, a, b, output) != MT_OK) {
        return MT_ERR_ARG;
    }
    mt_add_fwd_s8_tflite_ref(params, size, a, b, output);
    return MT_OK;
}
