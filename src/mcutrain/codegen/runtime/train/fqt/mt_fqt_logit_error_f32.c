/*
 * The logits' float32 error of the mixed and float32 precisions (Python twin: fqt.FQT._logit_error):
 * e = float32(err) * 2^-24, exact (|err| <= 2^24).
 */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

mt_status mt_fqt_logit_error_f32(int32_t size, const int32_t *err, float *e_out)
{
    int32_t i;
    if (!err || !e_out || size < 1) {
        return MT_ERR_ARG;
    }
    for (i = 0; i < size; ++i) {
        e_out[i] = mt_s64_to_f32(err[i]) * mt_pow2_f32(-24);
    }
    return MT_OK;
}
