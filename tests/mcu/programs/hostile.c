/*
 * Test program for the QEMU containment: it tries what a hostile model could inject into the
 * generated C, through raw semihosting calls, and still uses the files the run hands it.
 *
 * usage: hostile MODE ARGFILE OUT
 *        ARGFILE (a handed file, read with newlib's stdio) holds one line: the command for
 *        MODE=system (semihosting SYS_SYSTEM, 0x12) or the host path for MODE=open
 *        (SYS_OPEN for writing, 0x01, then SYS_WRITE of "pwned"). OUT (a handed file name)
 *        receives "result=<semihosting return value>" so the test sees the program ran.
 * exit:  0 the call was made (whatever it returned), 2 bad arguments, 3 cannot read ARGFILE,
 *        4 cannot write OUT
 */
#include <stdio.h>
#include <string.h>

#define SYS_OPEN 0x01
#define SYS_WRITE 0x05
#define SYS_SYSTEM 0x12
#define OPEN_MODE_W 4 /* "w" in the semihosting fopen mode table */

static char arg[512];

static int semihost(int op, void *block)
{
    register int r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = block;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static int try_system(void)
{
    struct {
        const char *cmd;
        int len;
    } block = {arg, (int)strlen(arg)};
    return semihost(SYS_SYSTEM, &block);
}

static int try_open_write(void)
{
    static const char text[] = "pwned";
    struct {
        const char *path;
        int mode;
        int len;
    } open_block = {arg, OPEN_MODE_W, (int)strlen(arg)};
    int fd = semihost(SYS_OPEN, &open_block);
    if (fd < 0) {
        return fd;
    }
    struct {
        int fd;
        const char *buf;
        int len;
    } write_block = {fd, text, (int)sizeof(text) - 1};
    return semihost(SYS_WRITE, &write_block) == 0 ? fd : -2;
}

int main(int argc, char **argv)
{
    FILE *f;
    int r;
    if (argc != 4) {
        printf("usage: hostile MODE ARGFILE OUT\n");
        return 2;
    }
    f = fopen(argv[2], "r");
    if (f == NULL || fgets(arg, sizeof(arg), f) == NULL) {
        printf("cannot read %s\n", argv[2]);
        return 3;
    }
    fclose(f);
    arg[strcspn(arg, "\r\n")] = '\0';
    if (strcmp(argv[1], "system") == 0) {
        r = try_system();
    } else if (strcmp(argv[1], "open") == 0) {
        r = try_open_write();
    } else {
        printf("unknown mode %s\n", argv[1]);
        return 2;
    }
    f = fopen(argv[3], "w");
    if (f == NULL || fprintf(f, "result=%d\n", r) < 0 || fclose(f) != 0) {
        printf("cannot write %s\n", argv[3]);
        return 4;
    }
    printf("result=%d\n", r);
    return 0;
}
