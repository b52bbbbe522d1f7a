/*
 * mcutrain runtime: the DSP paths of the FQT conv kernels for one-channel inputs (internal, not API).
 *
 * A first conv over a one-channel image (3x3 over a grey image, 1x5 over a time series) has a
 * reduction of a few values per output, so the general paths' blocking amortizes nothing: on
 * small-cnn's conv1 the forward spent 10 instructions per MAC and the weight gradient 6. These
 * paths keep the short reduction in registers instead. Both return 1 when they did the work and
 * 0 (having written nothing) when the shapes or the requantization do not fit them; the caller
 * then runs its general path. Results are identical either way (exact integer sums).
 */
#ifndef MT_CONV_C1_H
#define MT_CONV_C1_H

#include <stdint.h>

#include "mt_types.h"

/*
 * Forward of mt_conv2d_fwd_s8_range for C == 1, groups 1, kh * kw <= 10, O <= 32, every channel
 * on the floor requantization (output zero point -128, clamp [-128, 127], mt_requant_fast_ok).
 */
int mt_conv_c1_fwd(const mt_conv_params *params,
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

/* Weight and bias gradients of mt_conv2d_bwd_w_s8_s8 for C == 1, 3x3, stride 1, O a multiple of 4. */
int mt_conv_c1_bwd_w(const mt_conv_params *params,
                     const mt_dims *input_dims,
                     const int8_t *input,
                     const mt_dims *output_dims,
                     const int8_t *e,
                     const mt_dims *filter_dims,
                     int32_t *grad,
                     int32_t *grad_bias);

#endif /* MT_CONV_C1_H */
