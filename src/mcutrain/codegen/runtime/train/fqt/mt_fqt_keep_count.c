/*
 * How many structures a sample keeps under dynamic partial updates (Python twin:
 * methods.partial.keep_counts): k = floor(lambda * n), lambda linear in the loss between
 * lambda_min and lambda_max, clamped to [1, n]. Its own file so the reference and the DSP twin of
 * mt_fqt_topk.c both use it.
 */
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_fqt_math.h"

int32_t mt_fqt_keep_count(int32_t loss, int32_t loss_max, float lambda_min, float lambda_max, int32_t n)
{
    const float den = (float)(loss_max > 1 ? loss_max : 1);
    const float r = (loss < 0 ? -mt_s64_to_f32(loss) : mt_s64_to_f32(loss)) / den;
    float lam = lambda_min + r * (lambda_max - lambda_min);
    float k;
    lam = lam < 1.0f ? lam : 1.0f;
    k = mt_floor_f32(lam * (float)n);
    return k < 1.0f ? 1 : (k > (float)n ? n : (int32_t)k);
}
