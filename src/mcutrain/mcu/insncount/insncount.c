/*
 * insncount: a QEMU TCG plugin (plugin API version 1, QEMU 6.0 .. 8.x) that counts executed
 * guest instructions exactly, per instruction address, and optionally only inside measurement
 * regions delimited by two marker functions.
 *
 * Build: cc -shared -fPIC -O2 -o insncount.so insncount.c   (no QEMU headers needed)
 * Use:   qemu-system-arm ... -plugin insncount.so,out=FILE[,begin=0xADDR,end=0xADDR]
 *
 * Exactness: every translated instruction gets an inline "add 1" on the counter of its address,
 * emitted before the instruction. Counters live in slots keyed by address, so when QEMU
 * retranslates a block (after a TB flush or a block split) the new code adds to the same
 * counters: counts are made at execution, never at translation, and nothing is counted twice.
 * An instruction whose block ends early (an exception) is counted only if it was reached.
 *
 * Regions: a callback on the first instruction of the `begin` function snapshots all counters;
 * one on the first instruction of the `end` function adds (counter - snapshot) to the region
 * counters. That costs O(executed addresses) per marker call, which is microseconds, and keeps
 * the per-instruction cost a single inline add.
 *
 * The output's directory is opened at install, so the file is written through that descriptor:
 * QEMU's -chroot (applied after plugins load) confines the guest, not this plugin's output.
 *
 * Output (text, written at exit):
 *   insncount 1
 *   total N
 *   regions R
 *   unmatched U
 *   <vaddr hex> <count> <region count>      one line per executed address
 *
 * The handful of plugin API declarations below follow QEMU's include/qemu/qemu-plugin.h, which
 * Debian does not package; they are the stable version-1 API.
 */
#define _POSIX_C_SOURCE 200809L /* openat, renameat */
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- plugin API (version 1) -------------------------------------------------------------- */
#define MT_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;

typedef struct {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;

enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                            qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags,
                                            void *userdata);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
                                                enum qemu_plugin_op op,
                                                void *ptr,
                                                uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_outs(const char *string);

MT_EXPORT int qemu_plugin_version = 1;
MT_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv);

/* ---- counters ---------------------------------------------------------------------------- */
/* Slots never move once handed out (their counter addresses are baked into translated code),
 * so they are allocated in fixed chunks; the hash table only stores slot indices. */
#define CHUNK_BITS 12
#define CHUNK_SLOTS (1u << CHUNK_BITS)

typedef struct {
    uint64_t vaddr;
    uint64_t count;
    uint64_t snapshot;
    uint64_t region;
} slot_t;

static slot_t **chunks;
static size_t n_chunks;
static size_t n_slots;
static uint32_t *table; /* open addressing: slot index + 1, 0 = empty */
static size_t table_size;

static uint64_t begin_addr = UINT64_MAX;
static uint64_t end_addr = UINT64_MAX;
static bool in_region;
static uint64_t n_regions;
static uint64_t n_unmatched;
static const char *out_path;
static char *out_name;  /* out_path's last component, written inside out_dir */
static int out_dir = -1; /* out_path's directory, opened before QEMU chroots */

static slot_t *slot_at(size_t i)
{
    return &chunks[i >> CHUNK_BITS][i & (CHUNK_SLOTS - 1)];
}

static size_t hash_addr(uint64_t a, size_t mask)
{
    return (size_t)((a >> 1) * UINT64_C(0x9E3779B97F4A7C15) >> 20) & mask;
}

static void table_insert(size_t index)
{
    size_t mask = table_size - 1;
    size_t h = hash_addr(slot_at(index)->vaddr, mask);
    while (table[h] != 0) {
        h = (h + 1) & mask;
    }
    table[h] = (uint32_t)(index + 1);
}

static void die(const char *msg)
{
    fprintf(stderr, "insncount: %s\n", msg);
    exit(1);
}

static void table_grow(void)
{
    free(table);
    table_size = table_size ? table_size * 2 : 1u << 14;
    table = calloc(table_size, sizeof *table);
    if (table == NULL) {
        die("out of memory");
    }
    for (size_t i = 0; i < n_slots; i++) {
        table_insert(i);
    }
}

static slot_t *lookup(uint64_t vaddr)
{
    if (2 * (n_slots + 1) > table_size) {
        table_grow();
    }
    size_t mask = table_size - 1;
    size_t h = hash_addr(vaddr, mask);
    while (table[h] != 0) {
        slot_t *s = slot_at(table[h] - 1);
        if (s->vaddr == vaddr) {
            return s;
        }
        h = (h + 1) & mask;
    }
    if ((n_slots >> CHUNK_BITS) == n_chunks) {
        chunks = realloc(chunks, (n_chunks + 1) * sizeof *chunks);
        if (chunks == NULL || (chunks[n_chunks] = calloc(CHUNK_SLOTS, sizeof(slot_t))) == NULL) {
            die("out of memory");
        }
        n_chunks++;
    }
    slot_t *s = slot_at(n_slots);
    s->vaddr = vaddr;
    table[h] = (uint32_t)(n_slots + 1);
    n_slots++;
    return s;
}

/* ---- regions ----------------------------------------------------------------------------- */
static void on_begin(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    (void)userdata;
    if (in_region) {
        n_unmatched++; /* begin inside a region: keep the region that is open */
        return;
    }
    for (size_t i = 0; i < n_slots; i++) {
        slot_t *s = slot_at(i);
        s->snapshot = s->count;
    }
    in_region = true;
}

static void on_end(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    (void)userdata;
    if (!in_region) {
        n_unmatched++;
        return;
    }
    for (size_t i = 0; i < n_slots; i++) {
        slot_t *s = slot_at(i);
        s->region += s->count - s->snapshot; /* slots created inside the region had snapshot 0 */
    }
    in_region = false;
    n_regions++;
}

/* ---- translation and exit ---------------------------------------------------------------- */
static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
        slot_t *s = lookup(vaddr);
        if (vaddr == begin_addr) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_begin, QEMU_PLUGIN_CB_NO_REGS, NULL);
        } else if (vaddr == end_addr) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_end, QEMU_PLUGIN_CB_NO_REGS, NULL);
        }
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &s->count, 1);
    }
}

static void on_exit(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    /* Write to a temporary name and rename, so a reader never sees a half-written file. */
    size_t len = strlen(out_name) + 8;
    char *tmp = malloc(len);
    if (tmp == NULL) {
        die("out of memory");
    }
    snprintf(tmp, len, "%s.part", out_name);
    int fd = openat(out_dir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (f == NULL) {
        die("cannot open the output file");
    }
    uint64_t total = 0;
    for (size_t i = 0; i < n_slots; i++) {
        total += slot_at(i)->count;
    }
    fprintf(f, "insncount 1\ntotal %" PRIu64 "\nregions %" PRIu64 "\nunmatched %" PRIu64 "\n", total,
            n_regions, n_unmatched + (in_region ? 1u : 0u));
    for (size_t i = 0; i < n_slots; i++) {
        const slot_t *s = slot_at(i);
        if (s->count != 0) {
            fprintf(f, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n", s->vaddr, s->count, s->region);
        }
    }
    if (fclose(f) != 0 || renameat(out_dir, tmp, out_dir, out_name) != 0) {
        die("cannot write the output file");
    }
    close(out_dir);
    free(tmp);
}

/* Splits out_path into a directory descriptor and a name; false if the directory is unusable. */
static bool open_out_dir(void)
{
    const char *slash = strrchr(out_path, '/');
    char *dir;
    if (slash == NULL) {
        dir = strdup(".");
        out_name = strdup(out_path);
    } else {
        size_t n = (size_t)(slash - out_path);
        dir = n == 0 ? strdup("/") : strndup(out_path, n);
        out_name = strdup(slash + 1);
    }
    if (dir == NULL || out_name == NULL || out_name[0] == '\0') {
        free(dir);
        return false;
    }
    out_dir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    return out_dir >= 0;
}

static bool parse_addr(const char *text, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 0);
    if (end == text || *end != '\0') {
        return false;
    }
    *out = (uint64_t)v & ~UINT64_C(1); /* Thumb function symbols carry bit 0 */
    return true;
}

MT_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "out=", 4) == 0) {
            out_path = a + 4; /* argv lives as long as the plugin */
        } else if (strncmp(a, "begin=", 6) == 0) {
            if (!parse_addr(a + 6, &begin_addr)) {
                qemu_plugin_outs("insncount: bad begin= address\n");
                return -1;
            }
        } else if (strncmp(a, "end=", 4) == 0) {
            if (!parse_addr(a + 4, &end_addr)) {
                qemu_plugin_outs("insncount: bad end= address\n");
                return -1;
            }
        } else {
            qemu_plugin_outs("insncount: unknown argument (expected out=, begin=, end=)\n");
            return -1;
        }
    }
    if (out_path == NULL) {
        qemu_plugin_outs("insncount: missing out=FILE\n");
        return -1;
    }
    if (!open_out_dir()) {
        qemu_plugin_outs("insncount: cannot open the directory of out=FILE\n");
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_atexit_cb(id, on_exit, NULL);
    return 0;
}
