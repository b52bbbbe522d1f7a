/*
 * mcutrain runtime: the GEMM of mt_conv2d_fwd_s8_s16's general path, 2 weight rows x 3 columns
 * per register block, int16 weights (widened at export) times centred int16 columns.
 *
 * No reference code: the DSP paths' pieces are in dsp/mt_mat_mult_s16_s16_3col.c; a build
 * without the DSP twins compiles this empty unit in its place.
 */

/* ISO C forbids an empty translation unit. */
typedef int mt_mat_mult_s16_s16_3col_unused;
