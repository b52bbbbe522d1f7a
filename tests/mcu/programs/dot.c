/*
 * Test program for the mcu toolchain: reads two int8 vectors from a file, writes their dot
 * product (plain C, and with the DSP intrinsic __smlad where the core has it) to an output file,
 * and runs a loop of known instruction count between the measurement markers.
 *
 * usage: dot IN OUT N     IN holds 2*L bytes (a then b), OUT receives "dot=<int>" lines,
 *                         N is the iteration count of mt_count_loop.
 * exit:  0 ok, 2 bad arguments, 3 cannot read IN, 4 cannot write OUT
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mt_board.h"

#if defined(__ARM_FEATURE_DSP)
#include <arm_acle.h>
#endif /* defined(__ARM_FEATURE_DSP) */

#define MAX_LEN 4096

static int8_t buf[2 * MAX_LEN];

/* Three instructions per iteration, one before the loop and two after: 3n + 3 in total. */
uint32_t mt_count_loop(uint32_t n);
#if defined(__riscv)
__asm__("  .text\n"
        "  .global mt_count_loop\n"
        "  .type mt_count_loop, %function\n"
        "mt_count_loop:\n"
        "  li a1, 0\n"
        "1:\n"
        "  addi a1, a1, 1\n"
        "  addi a0, a0, -1\n"
        "  bnez a0, 1b\n"
        "  mv a0, a1\n"
        "  ret\n"
        "  .size mt_count_loop, .-mt_count_loop\n");
#else  /* !defined(__riscv) */
__asm__("  .text\n"
        "  .syntax unified\n"
        "  .thumb\n"
        "  .global mt_count_loop\n"
        "  .type mt_count_loop, %function\n"
        "  .thumb_func\n"
        "mt_count_loop:\n"
        "  movs r1, #0\n"
        "1:\n"
        "  adds r1, r1, #1\n"
        "  subs r0, r0, #1\n"
        "  bne 1b\n"
        "  mov r0, r1\n"
        "  bx lr\n"
        "  .size mt_count_loop, .-mt_count_loop\n");
#endif /* defined(__riscv) */

__attribute__((noinline)) int32_t mt_dot_s8(const int8_t *a, const int8_t *b, int32_t n)
{
    int32_t acc = 0;
    for (int32_t i = 0; i < n; i++) {
        acc += (int32_t)a[i] * (int32_t)b[i];
    }
    return acc;
}

#if defined(__ARM_FEATURE_DSP)
/* Two int8 products per __smlad; `n` must be even. Sign-extends pairs with __sxtb16. */
__attribute__((noinline)) int32_t mt_dot_s8_smlad(const int8_t *a, const int8_t *b, int32_t n)
{
    int32_t acc = 0;
    for (int32_t i = 0; i < n; i += 2) {
        uint32_t pa = (uint32_t)(uint8_t)a[i] | ((uint32_t)(uint8_t)a[i + 1] << 16);
        uint32_t pb = (uint32_t)(uint8_t)b[i] | ((uint32_t)(uint8_t)b[i + 1] << 16);
        acc = (int32_t)__smlad(__sxtb16(pa), __sxtb16(pb), (uint32_t)acc);
    }
    return acc;
}
#endif /* defined(__ARM_FEATURE_DSP) */

int main(int argc, char **argv)
{
    if (argc != 4) {
        printf("usage: dot IN OUT N\n");
        return 2;
    }
    FILE *in = fopen(argv[1], "rb");
    if (in == NULL) {
        printf("cannot open %s\n", argv[1]);
        return 3;
    }
    size_t got = fread(buf, 1, sizeof buf, in);
    fclose(in);
    int32_t len = (int32_t)(got / 2);
    uint32_t n = (uint32_t)strtoul(argv[3], NULL, 10);

    mt_mark_begin();
    uint32_t loops = mt_count_loop(n);
    mt_mark_end();

    int32_t dot = mt_dot_s8(buf, buf + len, len);
    FILE *out = fopen(argv[2], "wb");
    if (out == NULL) {
        return 4;
    }
    fprintf(out, "dot=%ld\n", (long)dot);
#if defined(__ARM_FEATURE_DSP)
    fprintf(out, "smlad=%ld\n", (long)mt_dot_s8_smlad(buf, buf + len, len & ~1));
#endif /* defined(__ARM_FEATURE_DSP) */
    fclose(out);
    printf("len=%ld loops=%lu stack=%lu heap=%lu\n", (long)len, (unsigned long)loops,
           (unsigned long)mt_stack_used(), (unsigned long)mt_heap_used());
    return 0;
}
