/*
 * Reset handler, vector table and semihosting glue for the emulated MPS2 boards (and any
 * Cortex-M whose memories start where the linker script puts FLASH and RAM). On the AN505 the
 * Cortex-M33 resets in Secure state with the SAU disabled, so all memory is Secure to it and
 * the image (linked at the Secure aliases) runs without any SAU, MPC or TrustZone set-up.
 *
 * Why not newlib's rdimon crt0: it asks the debugger (SYS_HEAPINFO) where heap and stack go,
 * and QEMU answers with its largest RAM block (the 16 MB PSRAM), outside the target's linked
 * RAM, so "it links" would no longer mean "it fits". Here stack and heap are linker sections
 * of fixed size inside RAM and _sbrk never leaves the heap section.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mt_board.h"

#define MT_STACK_PAINT 0xA5A5A5A5u
#define MT_MAX_ARGS 32
#define MT_CMDLINE_BYTES 1024

/* Semihosting operation numbers (Arm semihosting specification, v2.0). */
#define SYS_WRITE0 0x04
#define SYS_GET_CMDLINE 0x15
#define SYS_EXIT 0x18
#define ADP_STOPPED_RUNTIME_ERROR 0x20023

extern uint32_t __data_load__;
extern uint32_t __data_start__;
extern uint32_t __data_end__;
extern uint32_t __bss_start__;
extern uint32_t __bss_end__;
extern uint32_t __heap_start__;
extern uint32_t __heap_end__;
extern uint32_t __stack_limit__;
extern uint32_t __stack_top__;

extern void initialise_monitor_handles(void);
extern int main(int argc, char **argv);

void Reset_Handler(void);
void mt_fault_handler(void);

static char *mt_heap_brk;
static char mt_cmdline[MT_CMDLINE_BYTES];
static char *mt_argv[MT_MAX_ARGS + 1];

static int mt_semihost(int op, void *arg)
{
    register int r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

/* Entries 0..15: initial SP, reset, then the system exceptions; no device interrupts are used. */
__attribute__((section(".vectors"), used)) void (*const mt_vectors[16])(void) = {
    (void (*)(void))(uintptr_t)&__stack_top__,
    Reset_Handler,
    mt_fault_handler, /* NMI */
    mt_fault_handler, /* HardFault */
    mt_fault_handler, /* MemManage */
    mt_fault_handler, /* BusFault */
    mt_fault_handler, /* UsageFault */
#if defined(__ARM_ARCH_8M_MAIN__)
    mt_fault_handler, /* SecureFault (Armv8-M with the Security Extension: the M33 runs Secure) */
#else  /* Armv6-M/Armv7-M: reserved */
    0,
#endif /* defined(__ARM_ARCH_8M_MAIN__) */
    0, 0, 0,
    mt_fault_handler, /* SVCall */
    mt_fault_handler, /* DebugMon */
    0,
    mt_fault_handler, /* PendSV */
    mt_fault_handler, /* SysTick */
};

/* A fault ends the run with a message and a non-zero exit, instead of hanging until a timeout. */
void mt_fault_handler(void)
{
    mt_semihost(SYS_WRITE0, (void *)"mcutrain: CPU fault (HardFault/MemManage/BusFault/UsageFault/SecureFault)\n");
    mt_semihost(SYS_EXIT, (void *)ADP_STOPPED_RUNTIME_ERROR);
    for (;;) {
    }
}

/* Splits the semihosting command line at spaces; argv[0] is the program name QEMU passes. */
static int mt_read_args(void)
{
    struct {
        char *buf;
        int len;
    } block = {mt_cmdline, MT_CMDLINE_BYTES - 1};
    int argc = 0;
    if (mt_semihost(SYS_GET_CMDLINE, &block) != 0) {
        return 0;
    }
    mt_cmdline[MT_CMDLINE_BYTES - 1] = '\0';
    char *p = mt_cmdline;
    while (*p != '\0' && argc < MT_MAX_ARGS) {
        while (*p == ' ') {
            *p++ = '\0';
        }
        if (*p == '\0') {
            break;
        }
        mt_argv[argc++] = p;
        while (*p != '\0' && *p != ' ') {
            p++;
        }
    }
    mt_argv[argc] = NULL;
    return argc;
}

void Reset_Handler(void)
{
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    /* CPACR (0xE000ED88): full access to CP10 and CP11, i.e. enable the FPU before any VFP code;
       on Armv8.1-M the same two fields enable the Helium (MVE) vector instructions. */
    *(volatile uint32_t *)0xE000ED88u |= (0xFu << 20);
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif /* defined(__ARM_FP) || defined(__ARM_FEATURE_MVE) */
    memcpy(&__data_start__, &__data_load__,
           (size_t)((char *)&__data_end__ - (char *)&__data_start__));
    memset(&__bss_start__, 0, (size_t)((char *)&__bss_end__ - (char *)&__bss_start__));

    /* Paint the stack below this frame so mt_stack_used() can find the high-water mark. */
    char *sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    uint32_t *w = &__stack_limit__;
    while ((char *)(w + 16) < sp) {
        *w++ = MT_STACK_PAINT;
    }

    mt_heap_brk = (char *)&__heap_start__;
    initialise_monitor_handles();
    int argc = mt_read_args();
    exit(main(argc, mt_argv));
}

/* newlib's malloc grows the heap here; the heap is a fixed linker section, never more. */
void *_sbrk(ptrdiff_t incr)
{
    char *prev = mt_heap_brk;
    if (incr < 0 || (size_t)incr > (size_t)((char *)&__heap_end__ - mt_heap_brk)) {
        errno = ENOMEM;
        return (void *)-1;
    }
    mt_heap_brk += incr;
    return prev;
}

/* newlib's exit() runs the fini arrays through _fini; C programs here have nothing to run. */
void _init(void);
void _fini(void);
void _init(void)
{
}
void _fini(void)
{
}

uint32_t mt_heap_used(void)
{
    return (uint32_t)(mt_heap_brk - (char *)&__heap_start__);
}

#include "mt_startup_common.h" /* mt_stack_used, mt_mark_begin, mt_mark_end */
