/*
 * Transposed conv of prescaled int16 errors with int8 weights (Python twin:
 * fqt_kernels.conv2d_bwd_in_acc in mode "int" and fqt.FQT._to_err). Each input position gathers the
 * output positions whose window covers it, for a block of input channels at once (contiguous
 * weights, zero errors skipped), so no accumulator buffer beyond the stack block is needed.
 * mt_conv2d_bwd_in_s8_s16_keep (partial updates) runs the same loops over the kept output channels:
 * its errors come compacted from mt_fqt_prescale_s16_keep ([positions, stride], zero columns past
 * n_keep), so the loops take the row stride as O and find each kept channel's filter through keep
 * (zero weights past n_keep); the pruned terms are 0, so the sums are the dense kernel's.
 * NOTE: |acc| <= 32512 * 127 * (taps * O) < 2^31 is checked by the exporter (taps * O <= 520); the
 * bound holds for partial sums in any order, so the DSP order gives the same sums.
 * Reference kernel (mt_conv2d_bwd_in_s8_s16_ref.h); dsp/mt_conv2d_bwd_in_s8_s16.c is its DSP twin.
 */
#include <stddef.h>

#include "mt_conv2d_bwd_in_s8_s16_ref.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"

mt_status mt_conv2d_bwd_in_s8_s16(const mt_conv_params *params,
                                  const int32_t *channels,
                                  int32_t n_channels,
                                  const mt_dims *output_dims,
                                  const int16_t *e16,
                                  const mt_dims *filter_dims,
                                  const int8_t *filter,
                                  const mt_dims *input_dims,
                                  int32_t multiplier,
                                  int32_t shift,
                                  int8_t *e_x,
                                  int32_t *acc_min,
                                  int32_t *acc_max)
{
    return mt_conv2d_bwd_in_s8_s16_with(params, channels, n_channels, output_dims, e16, filter_dims, filter,
                                        input_dims, multiplier, shift, e_x, acc_min, acc_max, NULL);
}

mt_status mt_conv2d_bwd_in_s8_s16_keep(const mt_conv_params *params,
                                       const int32_t *keep,
                                       int32_t n_keep,
                                       const mt_dims *output_dims,
                                       const int16_t *e16,
                                       const mt_dims *filter_dims,
                                       const int8_t *filter,
                                       const mt_dims *input_dims,
                                       int32_t multiplier,
                                       int32_t shift,
                                       int8_t *e_x,
                                       int32_t *acc_min,
                                       int32_t *acc_max)
{
    return mt_conv2d_bwd_in_s8_s16_keep_with(params, keep, n_keep, output_dims, e16, filter_dims, filter, input_dims,
                                             multiplier, shift, e_x, acc_min, acc_max, NULL);
}
