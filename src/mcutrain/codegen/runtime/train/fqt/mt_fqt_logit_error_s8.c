/*
 * The logits' int8 error from the integer softmax cross-entropy's Q24 error (Python twin:
 * fqt.FQT._logit_error): range, first-step seeding of its EMA, power-of-two scale, rounding shift.
 */
#include "mt_fixedpoint.h"
#include "mt_fqt.h"
#include "mt_fqt_logit_error.h"
#include "mt_train_math.h"

mt_status mt_fqt_logit_error_s8(int32_t size, const int32_t *err, int32_t seed, mt_fqt_range *r, int8_t *e_out)
{
    int32_t i, e, n;
    if (!err || !r || !e_out || size < 1) {
        return MT_ERR_ARG;
    }
    if (!mt_fqt_logit_error_range(size, err, seed, r)) {
        return MT_OK;
    }
    e = mt_fqt_err_exp(r->lo, r->hi);
    n = 24 + e;
    for (i = 0; i < size; ++i) {
        int64_t v;
        if (n >= 1) {
            v = mt_rounding_shift_right_s64(err[i], n);
        } else {
            /* |err| <= 2^24 and 24 + e >= -102: clamp before shifting what cannot stay in range */
            v = err[i] == 0 ? 0 : (err[i] > 0 ? 127 : -127);
            if (-n < 8) {
                v = (int64_t)err[i] * ((int64_t)1 << -n);
            }
        }
        v = v < -127 ? -127 : (v > 127 ? 127 : v);
        e_out[i] = (int8_t)v;
    }
    return MT_OK;
}
