/*
 * The int32 bias of an FQT int8 layer follows its accumulator scale float32(s_x) * s_w[c] as the
 * ranges move, and takes its update (Python twin: fqt.FQT._rescale_bias and fqt.FQT._bias_room).
 * Reference kernel (mt_fqt_bias_rescale_s32_ref.h); dsp/mt_fqt_bias_rescale_s32.c is its DSP twin.
 */
#include "mt_fqt.h"
#include "mt_fqt_bias_rescale_s32_ref.h"

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
    return mt_fqt_bias_rescale_s32_with(channels, per_channel, w, s_x, s_w, bias_step, upd, acc_scale, bias,
                                        mt_fqt_l1_s8_ref);
}
