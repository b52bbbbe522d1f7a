/*
 * mcutrain runtime: the DSP GEMM core for int16 weights (widened at export) times centred int16
 * columns, 1 weight row x 7 columns per register block.
 *
 * No reference code: the DSP paths' pieces are in dsp/mt_mat_mult_s16_s16.c; a build
 * without the DSP twins compiles this empty unit in its place.
 */

/* ISO C forbids an empty translation unit. */
typedef int mt_mat_mult_s16_s16_unused;
