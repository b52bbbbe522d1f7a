/*
 * mcutrain runtime: the tiny path of mt_conv2d_fwd_s8_s16, for convs whose reduction has at most
 * ten values (a first layer: 3x3 over one channel, 1x5 over a time series).
 *
 * No reference code: the DSP paths' pieces are in dsp/mt_conv_s16_tiny.c; a build
 * without the DSP twins compiles this empty unit in its place.
 */

/* ISO C forbids an empty translation unit. */
typedef int mt_conv_s16_tiny_unused;
