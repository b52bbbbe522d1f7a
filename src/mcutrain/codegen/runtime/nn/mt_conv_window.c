/*
 * mcutrain runtime: the padded-row window of mt_conv2d_fwd_s8_s16's DSP paths (mt_conv_s16.h).
 *
 * No reference code: the DSP paths' pieces are in dsp/mt_conv_window.c; a build
 * without the DSP twins compiles this empty unit in its place.
 */

/* ISO C forbids an empty translation unit. */
typedef int mt_conv_window_unused;
