/* startup.c: reset and exception vectors of a bare-metal @board@ image (@core@), no vendor SDK.
 *
 * Reset copies .data from Flash to RAM, zeroes .bss, turns the FPU on where the build uses it, and
 * calls main. Only the 16 system exceptions are in the table: add the chip's interrupt vectors
 * after them (or replace this file by the vendor's startup) when the firmware uses interrupts.
 */
#include <stdint.h>

extern uint32_t __data_load__;
extern uint32_t __data_start__;
extern uint32_t __data_end__;
extern uint32_t __bss_start__;
extern uint32_t __bss_end__;
extern uint32_t __stack_top__;

extern int main(void);

void Reset_Handler(void);
void Default_Handler(void);

__attribute__((section(".vectors"), used)) void (*const vectors[16])(void) = {
    (void (*)(void))(uintptr_t)&__stack_top__,
    Reset_Handler,
    Default_Handler, /* NMI */
    Default_Handler, /* HardFault */
    Default_Handler, /* MemManage */
    Default_Handler, /* BusFault */
    Default_Handler, /* UsageFault */
    0, 0, 0, 0,
    Default_Handler, /* SVCall */
    Default_Handler, /* DebugMonitor */
    0,
    Default_Handler, /* PendSV */
    Default_Handler, /* SysTick */
};

void Reset_Handler(void)
{
    uint32_t *src = &__data_load__;
    uint32_t *dst;
    for (dst = &__data_start__; dst < &__data_end__;) {
        *dst++ = *src++;
    }
    for (dst = &__bss_start__; dst < &__bss_end__;) {
        *dst++ = 0;
    }
#if defined(__ARM_FP)
    /* CPACR: full access to CP10 and CP11 (the FPU) before the first float instruction */
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif /* __ARM_FP */
    (void)main();
    for (;;) {
    }
}

void Default_Handler(void)
{
    for (;;) {
    }
}
