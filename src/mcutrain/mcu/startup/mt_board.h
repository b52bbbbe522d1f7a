/*
 * Board runtime for programs that mcutrain builds for Cortex-M: reset, semihosting stdio and
 * files, argc/argv, measurement markers and memory high-water marks.
 *
 * A program only defines `int main(int argc, char **argv)`; startup.c provides the vector table
 * and the reset handler, which enables the FPU (M4F/M7), copies .data, zeroes .bss, paints the
 * stack, opens the semihosting stdio handles, reads the command line and calls
 * `exit(main(argc, argv))`. The exit status reaches the host as QEMU's exit code.
 */
#ifndef MT_BOARD_H
#define MT_BOARD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Measurement markers. The instruction-count plugin counts the instructions executed between a
 * call to mt_mark_begin() and the next call to mt_mark_end() (the bodies of the two markers are
 * excluded; the caller's `bl mt_mark_end` is included). Regions may repeat; counts add up.
 * On real hardware they are empty functions.
 */
void mt_mark_begin(void);
void mt_mark_end(void);

/* Bytes of stack ever used since reset (high-water mark of the painted stack). */
uint32_t mt_stack_used(void);

/* Bytes of heap ever handed out by _sbrk (newlib's stdio buffers live there). */
uint32_t mt_heap_used(void);

#ifdef __cplusplus
}
#endif

#endif /* MT_BOARD_H */
