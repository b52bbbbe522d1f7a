/*
 * float32 global average pool, precision float32 (Python twin: the GLOBAL_AVGPOOL branch of
 * fqt.FQT._forward on float32: seq_sum over the positions, then / float32(H * W)): per channel the
 * sum over positions in order from +0.0, divided by H * W.
 */
#include "mt_fqt.h"

mt_status mt_global_avgpool_fwd_f32(const mt_dims *input_dims, const float *input, float *output)
{
    const mt_dims *d = input_dims;
    int32_t n, c, i, count;
    if (!d || !input || !output || d->n < 1 || d->h < 1 || d->w < 1 || d->c < 1 || d->h * d->w >= (1 << 24)) {
        return MT_ERR_ARG;
    }
    count = d->h * d->w;
    for (n = 0; n < d->n; n++) {
        const float *x = input + n * count * d->c;
        for (c = 0; c < d->c; c++) {
            float sum = 0.0f;
            for (i = 0; i < count; i++) {
                sum += x[i * d->c + c];
            }
            output[n * d->c + c] = sum / (float)count; /* count < 2^24: exact in float32 */
        }
    }
    return MT_OK;
}
