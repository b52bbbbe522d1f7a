/*
 * The int32 bias of an FQT layer follows its accumulator scale float32(s_x) * s_w[c] as the ranges
 * move, and takes its update (Python twin: fqt.FQT._rescale_bias and fqt.FQT._bias_room).
 */
#include "mt_fqt.h"
#include "mt_train_math.h"

mt_status mt_fqt_bias_rescale_s32(int32_t channels,
                                  int32_t per_channel,
                                  const int8_t *w,
                                  float s_x,
                                  const float *s_w,
                                  const float *bias_step,
                                  const uint8_t *upd,
                                  float *acc_scale,
                                  int32_t *bias)
{
    int32_t c, k;
    if (!w || !s_w || !acc_scale || !bias || channels < 1) {
        return MT_ERR_ARG;
    }
    for (c = 0; c < channels; ++c) {
        const float s_new = s_x * s_w[c];
        const int32_t updated = bias_step != NULL && (upd == NULL || upd[c]);
        const float step = bias_step != NULL ? bias_step[c] : 0.0f;
        float real;
        float q;
        double qd;
        double room;
        int64_t l1 = 0;
        if (s_new == acc_scale[c] && !updated) {
            continue;
        }
        for (k = 0; k < per_channel; ++k) {
            const int32_t v = w[c * per_channel + k];
            l1 += v < 0 ? -v : v;
        }
        room = 2147483647.0 - 255.0 * (double)l1;
        room = room > 0.0 ? room : 0.0;
        real = mt_s64_to_f32(bias[c]) * acc_scale[c] - step;
        q = real / s_new;
        if (q == q && q < 3.0e38f && q > -3.0e38f) {
            q = mt_round_half_away_inline_f32(q);
        }
        qd = (double)q;
        if (!(qd == qd)) {
            qd = 0.0; /* NaN cannot arise from finite operands; keep the bias defined */
        }
        qd = qd > room ? room : (qd < -room ? -room : qd);
        bias[c] = (int32_t)qd;
        acc_scale[c] = s_new;
    }
    return MT_OK;
}
