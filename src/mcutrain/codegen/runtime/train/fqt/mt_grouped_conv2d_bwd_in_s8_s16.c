/*
 * Transposed grouped conv (depthwise and dense included) of prescaled int16 errors with int8
 * weights (Python twin: fqt_kernels.conv2d_bwd_in_acc in mode "int", then fqt.FQT._to_err or,
 * for a tensor with several consumers, fqt.FQT._as_real).
 * Input channel c of group g = c / cig gathers, over the taps whose window covers its position,
 * the errors of the group's output channels o = g * opg ... times w[o, i, j, c - g * cig].
 * NOTE: |e16 * w| <= 32512 * 127, so up to MT_BWD_IN_TERMS products fit an int32 sum in any
 * order; longer sums (dense 1x1 convs with many output channels) are flushed into int64 every
 * MT_BWD_IN_TERMS products, which keeps them exact. A requantized (or range-only) result beyond
 * int32 is refused (MT_ERR_ARG), as the Python twin's requantize refuses it.
 * Reference kernel (mt_grouped_conv2d_bwd_in_s8_s16_ref.h); dsp/mt_grouped_conv2d_bwd_in_s8_s16.c is
 * its DSP twin.
 */
#include "mt_grouped_conv2d_bwd_in_s8_s16_ref.h"

mt_status mt_grouped_conv2d_bwd_in_s8_s16(const mt_conv_params *params,
                                          const mt_dims *output_dims,
                                          const int16_t *e16,
                                          const mt_dims *filter_dims,
                                          const int8_t *filter,
                                          const mt_dims *input_dims,
                                          int32_t multiplier,
                                          int32_t shift,
                                          int8_t *e_x,
                                          float s_acc,
                                          float *e_real,
                                          int32_t *acc_min,
                                          int32_t *acc_max)
{
    return mt_grouped_conv2d_bwd_in_s8_s16_ref(params, output_dims, e16, filter_dims, filter, input_dims, multiplier,
                                               shift, e_x, s_acc, e_real, acc_min, acc_max);
}
