/*
 * mcutrain runtime: the DSP GEMM core (int8 weight rows times centred int16 columns).
 *
 * No reference code: the DSP paths' pieces are in dsp/mt_mat_mult_s8_s16.c; a build
 * without the DSP twins compiles this empty unit in its place.
 */

/* ISO C forbids an empty translation unit. */
typedef int mt_mat_mult_s8_s16_unused;
