/*
 * mcutrain runtime: the DSP path of mt_conv2d_fwd_s8_range for dense convs whose input channels
 * are a multiple of four (internal, not API).
 */
#ifndef MT_CONV_FWD_PAIRS_H
#define MT_CONV_FWD_PAIRS_H

#include <stdint.h>

#include "mt_types.h"

/*
 * mt_conv2d_fwd_s8_range for groups 1, C a multiple of 4, O even and at most 64, every channel on
 * the floor requantization (output zero point -128, clamp [-128, 127], mt_requant_fast_ok), with
 * a scratch of at least 4 * K bytes. Returns 1 when it did the work, 0 (nothing written) when the
 * layer does not fit it.
 */
int mt_conv_fwd_pairs(const mt_context *ctx,
                      const mt_conv_params *params,
                      const mt_per_channel_quant *quant,
                      const mt_dims *input_dims,
                      const int8_t *input,
                      const mt_dims *filter_dims,
                      const int8_t *filter,
                      const int32_t *bias,
                      const mt_dims *output_dims,
                      int8_t *output,
                      int32_t *acc_min,
                      int32_t *acc_max);

#endif /* MT_CONV_FWD_PAIRS_H */
