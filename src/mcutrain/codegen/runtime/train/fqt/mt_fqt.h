/*
 * mcutrain runtime: the fully quantized training (FQT) kernels of every precision (public API).
 *
 * The C twins of mcutrain.methods.fqt (Deutel et al., "On-Device Training of Fully Quantized Deep
 * Neural Networks on Cortex-M Microcontrollers", IEEE TCAD 44(4), 2025) in the project's int8
 * format: per-output-channel symmetric int8 weights, asymmetric per-tensor int8 activations with
 * fixed-point requantization, symmetric int8 errors with power-of-two scales, dynamic ranges
 * (exponential moving averages, EMA) recomputed on the device, gradient standardization and an
 * in-place update with stochastic rounding from the xorshift32 stream. docs/c-training-kernels.md
 * ("FQT") gives every float32 operation order; build with -ffp-contract=off, no fast-math.
 *
 * Conventions as in mt_nn.h / mt_train.h: NHWC activations, OHWI filters, (O, I) linear weights;
 * kernels overwrite their outputs unless they say "accumulate"; no allocation; MT_OK or MT_ERR_ARG.
 *
 * One header per precision (mt_fqt_s8.h, mt_fqt_u8.h, mt_fqt_f32.h) over what they share
 * (mt_fqt_common.h); generated libraries include this one.
 */
#ifndef MT_FQT_H
#define MT_FQT_H

#include "mt_fqt_common.h"
#include "mt_fqt_s8.h"
#include "mt_fqt_u8.h"
#include "mt_fqt_u8_graph.h"
#include "mt_fqt_f32.h"
#include "mt_fqt_f32_graph.h"

#endif /* MT_FQT_H */
