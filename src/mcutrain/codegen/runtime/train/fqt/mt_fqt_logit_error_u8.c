/*
 * The logits' uint8 error of seed A from the Q24 error p - onehot (Python twin:
 * fqt.FQT._logit_error, precision uint8): range into *r (seeded on a batch-1 first step), then
 * e = clamp(floor(float32(err) * float32(2^-24 / s_e)) + z_e, 0, 255) with r's uint8 qparams.
 */
#include "mt_fqt.h"
#include "mt_fqt_logit_error.h"
#include "mt_fqt_math.h"

mt_status mt_fqt_logit_error_u8(int32_t size, const int32_t *err, int32_t seed, mt_fqt_range *r, uint8_t *e_out)
{
    int32_t i, z;
    float s, m;
    if (!err || !r || !e_out || size < 1) {
        return MT_ERR_ARG;
    }
    if (!mt_fqt_logit_error_range(size, err, seed, r)) {
        return MT_OK;
    }
    mt_fqt_qparams_u8(r->lo, r->hi, &s, &z);
    m = mt_pow2_f32(-24) / s;
    for (i = 0; i < size; ++i) {
        e_out[i] = (uint8_t)mt_requant_f32_floor(err[i], m, z, 0, 255);
    }
    return MT_OK;
}
