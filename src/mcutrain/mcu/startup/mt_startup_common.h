/*
 * What the Arm and the RISC-V startup files share: the stack measure and the step markers of the
 * instruction counter. Included by startup.c and startup_riscv.c only (one definition per image);
 * each defines MT_STACK_PAINT, __stack_limit__ and __stack_top__ before it.
 */
#ifndef MT_STARTUP_COMMON_H
#define MT_STARTUP_COMMON_H

#include <stdint.h>

uint32_t mt_stack_used(void)
{
    const uint32_t *w = &__stack_limit__;
    while (w < &__stack_top__ && *w == MT_STACK_PAINT) {
        w++;
    }
    return (uint32_t)((const char *)&__stack_top__ - (const char *)w);
}

/* The markers must stay distinct, callable functions: noipa keeps GCC from inlining, cloning or
 * folding them into one (identical code folding), and the asm keeps their bodies from vanishing. */
__attribute__((noinline, noipa, used)) void mt_mark_begin(void)
{
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noipa, used)) void mt_mark_end(void)
{
    __asm__ volatile("nop" ::: "memory");
}

#endif /* MT_STARTUP_COMMON_H */
