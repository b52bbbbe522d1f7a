/*
 * ZO node-perturbation sum G[b, j] += (l_i[b] - l0[b]) * u * m (docs/integer-semantics.md 12.4),
 * replaying the query's draws (32 signs each, over the [B, d_out] output in C order) from a saved
 * copy of the stream state.
 */
#include "mt_train.h"

mt_status mt_zo_accumulate_np_s32(uint32_t *state,
                                  int32_t batch,
                                  int32_t d_out,
                                  const int32_t *dl,
                                  const int8_t *y,
                                  int32_t act_min,
                                  int32_t act_max,
                                  int32_t *g)
{
    int32_t b;
    int32_t j;
    uint32_t bits = 0u; /* the current draw, shifted so its next sign is bit 0 */
    int32_t left = 0;   /* signs left in `bits`; the draws run on across sample rows */
    if (state == NULL || dl == NULL || y == NULL || g == NULL || batch < 1 || d_out < 0) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < batch; ++b) {
        const int32_t d = dl[b];
        const int8_t *yr = y + (int64_t)b * d_out;
        int32_t *gr = g + (int64_t)b * d_out;
        for (j = 0; j < d_out; ++j) {
            if (left == 0) {
                bits = mt_xorshift32_next(state); /* drawn even where masked */
                left = 32;
            }
            if (yr[j] > act_min && yr[j] < act_max) {
                /* |d| < 2^24 per query; at most MT_ZO_MAX_QUERIES_S32 queries keep |g| < 2^31 */
                gr[j] += (bits & 1u) != 0u ? -d : d;
            }
            bits >>= 1;
            --left;
        }
    }
    return MT_OK;
}
