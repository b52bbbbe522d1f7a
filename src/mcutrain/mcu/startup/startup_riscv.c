/*
 * Reset code, trap handler and semihosting glue for RISC-V programs on QEMU's `virt` board (and
 * any RV32 whose memories start where the linker script puts FLASH and RAM): the RISC-V twin of
 * startup.c, with the same mt_board.h interface.
 *
 * Why not picolibc's crt0: its linker script sizes the heap as "the rest of RAM", so "it links"
 * would not mean "it fits", and it has no stack painting. Here stack and heap are linker sections
 * of fixed size inside RAM (picolibc's sbrk stops at __heap_end), the command line is read over
 * semihosting, and exit(status) reaches the host as QEMU's exit code (picolibc's _exit uses
 * SYS_EXIT_EXTENDED, which QEMU 7.2 supports for RISC-V).
 *
 * Why our own stdout and stderr: picolibc's semihosting streams write a character at a time to the
 * semihosting console (SYS_WRITEC), which QEMU sends to its stderr. The ARM harness's newlib writes
 * to ":tt" handles instead, which QEMU maps to its own stdout (opened "w") and stderr (opened "a").
 * These streams do the same, a line at a time, so the host reads results from QEMU's stdout and
 * failure messages from its stderr on both architectures.
 */
#include <picolibc.h> /* before picotls.h: defines PICOLIBC_TLS */
#include <picotls.h>
#include <semihost.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_board.h"

#define MT_STACK_PAINT 0xA5A5A5A5u
#define MT_MAX_ARGS 32
#define MT_CMDLINE_BYTES 1024
#define MT_LINE_BYTES 256
#define MT_SEMI_MODE_W 4 /* fopen mode "w": ":tt" is the host's stdout */
#define MT_SEMI_MODE_A 8 /* fopen mode "a": ":tt" is the host's stderr */

extern uint32_t __data_load__;
extern uint32_t __data_start__;
extern uint32_t __data_end__;
extern uint32_t __bss_start__;
extern uint32_t __bss_end__;
extern uint32_t __stack_limit__;
extern uint32_t __stack_top__;
extern char __heap_start__;
extern char __tls_base;

extern int main(int argc, char **argv);
extern void *sbrk(ptrdiff_t incr);

void _start(void);
void mt_start_c(void);
void mt_trap_handler(void);

/* One console stream: a semihosting handle of ":tt" and the line not yet written to it. */
typedef struct {
    FILE file; /* first, so the FILE * picolibc passes back is the stream */
    int handle;
    int mode;
    uintptr_t len;
    char line[MT_LINE_BYTES];
} mt_console_t;

static int mt_console_flush(FILE *f)
{
    mt_console_t *c = (mt_console_t *)f;
    if (c->len == 0) {
        return 0;
    }
    if (c->handle < 0) {
        c->handle = sys_semihost_open(":tt", c->mode);
    }
    uintptr_t n = c->len;
    c->len = 0;
    return (c->handle >= 0 && sys_semihost_write(c->handle, c->line, n) == 0) ? 0 : EOF;
}

static int mt_console_put(char ch, FILE *f)
{
    mt_console_t *c = (mt_console_t *)f;
    c->line[c->len++] = ch;
    if (ch == '\n' || c->len == MT_LINE_BYTES) {
        if (mt_console_flush(f) != 0) {
            return EOF;
        }
    }
    return (unsigned char)ch;
}

static mt_console_t mt_stdout = {FDEV_SETUP_STREAM(mt_console_put, NULL, mt_console_flush, _FDEV_SETUP_WRITE),
                                 -1, MT_SEMI_MODE_W, 0, {0}};
static mt_console_t mt_stderr = {FDEV_SETUP_STREAM(mt_console_put, NULL, mt_console_flush, _FDEV_SETUP_WRITE),
                                 -1, MT_SEMI_MODE_A, 0, {0}};
static FILE mt_stdin = FDEV_SETUP_STREAM(NULL, sys_semihost_getc, NULL, _FDEV_SETUP_READ);

FILE *const stdout = &mt_stdout.file;
FILE *const stderr = &mt_stderr.file;
FILE *const stdin = &mt_stdin;

/* exit() runs this, so a last line without '\n' still reaches the host. */
static void mt_console_flush_all(void)
{
    mt_console_flush(stdout);
    mt_console_flush(stderr);
}

static char *mt_heap_base;
static char mt_cmdline[MT_CMDLINE_BYTES];
static char *mt_argv[MT_MAX_ARGS + 1];

/* The entry: stack and global pointer first, with no C before them (gp relaxation needs gp). */
__attribute__((naked, section(".text.init.enter"), used)) void _start(void)
{
    __asm__ volatile(".option push\n\t"
                     ".option norelax\n\t"
                     "la gp, __global_pointer$\n\t"
                     ".option pop\n\t"
                     "la sp, __stack_top__\n\t"
                     "la t0, mt_trap_handler\n\t"
                     ".option push\n\t"
                     ".option arch, +zicsr\n\t" /* binutils 2.38+ split the CSR instructions out of I */
                     "csrw mtvec, t0\n\t"
#if defined(__riscv_flen)
                     /* mstatus.FS = initial: without it every float instruction traps */
                     "li t0, 0x2000\n\t"
                     "csrs mstatus, t0\n\t"
#endif /* __riscv_flen */
                     ".option pop\n\t"
                     "j mt_start_c");
}

/* A trap (illegal instruction, misaligned or faulting access, ecall) ends the run with a message and
 * a non-zero exit, instead of hanging until a timeout. mtvec needs a 4-byte aligned handler. */
__attribute__((aligned(4), noreturn)) void mt_trap_handler(void)
{
    sys_semihost_write0("mcutrain: CPU trap (illegal instruction, access fault or misaligned access)\n");
    sys_semihost_exit(ADP_Stopped_RunTimeErrorUnknown, 1);
}

/* Splits the semihosting command line at spaces; argv[0] is the program name QEMU passes. */
static int mt_read_args(void)
{
    int argc = 0;
    if (sys_semihost_get_cmdline(mt_cmdline, MT_CMDLINE_BYTES - 1) != 0) {
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

__attribute__((noreturn, used)) void mt_start_c(void)
{
    memcpy(&__data_start__, &__data_load__,
           (size_t)((char *)&__data_end__ - (char *)&__data_start__));
    memset(&__bss_start__, 0, (size_t)((char *)&__bss_end__ - (char *)&__bss_start__));
    /* picolibc's errno is thread-local: tp points at a copy of .tdata followed by a zeroed .tbss. */
    _init_tls(&__tls_base);
    _set_tls(&__tls_base);

    /* Paint the stack below this frame so mt_stack_used() can find the high-water mark. */
    char *sp;
    __asm__ volatile("mv %0, sp" : "=r"(sp));
    uint32_t *w = &__stack_limit__;
    while ((char *)(w + 16) < sp) {
        *w++ = MT_STACK_PAINT;
    }

    mt_heap_base = &__heap_start__;
    atexit(mt_console_flush_all);
    int argc = mt_read_args();
    exit(main(argc, mt_argv));
}

uint32_t mt_heap_used(void)
{
    return (uint32_t)((char *)sbrk(0) - mt_heap_base);
}

#include "mt_startup_common.h" /* mt_stack_used, mt_mark_begin, mt_mark_end */
