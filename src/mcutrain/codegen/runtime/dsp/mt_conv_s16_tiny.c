/*
 * mcutrain runtime: the tiny path of mt_conv2d_fwd_s8_s16, for convs whose reduction has at most
 * ten values (a first layer: 3x3 over one channel, 1x5 over a time series).
 *
 * Why a path of its own: a GEMM block amortizes its loads over the reduction, and with nine
 * MACs per output there is nothing to amortize them over: the 1x7 block spent 3.07 instructions
 * per MAC on small-cnn's conv1 (loop 1.14, requantization 0.67, row overhead 0.46, im2col 0.67).
 * Here one pixel's column (five pairs) stays in registers while every output channel's record
 * streams past it: two LDM bring the five weight pairs, the bias and the three requantization
 * constants, five SMLAD do the dot product, and SMMLA + ASR + SSAT + STRB requantize and store
 * (mt_requantize_floor; layers whose zero point is not -128 take mt_requantize_fast, two more).
 * 11 instructions per output channel, about 1.2 per MAC; the columns of 16 pixels are built
 * in one call from the padded-row window (mt_conv_s16.h), so borders cost nothing extra.
 *
 * Column and record order (both from the same rule, mt_conv_tiny_words): per kernel row of
 * L = kw * C values read as words of four (SXTAB16 gives (x0, x2) and, rotated, (x1, x3)), the
 * full pairs of its groups in order; then the half-filled pairs of the rows' last groups
 * (a group of L % 4 values), their low halves packed two by two (PKHBT). Up to five pairs; the
 * unused ones have zero weights.
 *
 * DSP only: nn/mt_conv_s16_tiny.c is its empty reference twin, what a build without the DSP
 * twins compiles in its place.
 */
#include <string.h>

#include "mt_conv_s16.h"
#include "mt_fixedpoint.h"

#if MT_DSP

/* Full pairs and half-filled pairs of one kernel row of L values. */
static int32_t row_full(int32_t L)
{
    return 2 * (L >> 2) + ((L & 3) == 3);
}

static int32_t row_halves(int32_t L)
{
    static const int8_t halves[4] = {0, 1, 2, 1};
    return halves[L & 3];
}

int32_t mt_conv_tiny_words(const mt_dims *f_d)
{
    const int32_t L = f_d->w * f_d->c;
    return f_d->h * row_full(L) + (f_d->h * row_halves(L) + 1) / 2;
}

int mt_conv_tiny_fits(const mt_conv_params *p, const mt_dims *f_d)
{
    return p->groups == 1 && f_d->n % 4 == 0 && f_d->h * f_d->w * f_d->c <= 2 * MT_TINY_WORDS &&
           mt_conv_tiny_words(f_d) <= MT_TINY_WORDS;
}

int32_t mt_conv_tiny_buffer_size(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *f_d,
                                 const mt_dims *out_d)
{
    return 4 * MT_TINY_RECORD * f_d->n + 4 * MT_TINY_WORDS * MT_TINY_PIXELS +
           2 * f_d->h * mt_conv_window_row_bytes(p, in_d, f_d, out_d->w);
}

/*
 * The records [O][MT_TINY_RECORD] from the widened weights ([O, kh, R], SMLAD order: a group's
 * int16 pairs are (w0, w2) and (w1, w3)). Returns 1 for the floor requantization (zero point
 * -128), 2 for mt_requantize_fast, 0 when some channel needs the general mt_requantize.
 */
static int prepare(const mt_conv_params *p,
                   const mt_per_channel_quant *q,
                   const mt_dims *f_d,
                   const int16_t *filter,
                   const int32_t *bias,
                   int32_t *rec)
{
    const int32_t L = f_d->w * f_d->c;
    const int32_t R = (L + 3) & ~3;
    const int32_t kp = f_d->h * R;
    const int32_t g4 = L >> 2;
    const int32_t t = L & 3;
    const int32_t zp = p->output_zero_point;
    int32_t o, ky, g;
    if (p->act_min != -128 || p->act_max != 127) {
        return 0;
    }
    for (o = 0; o < f_d->n; o++) {
        if (!mt_requant_fast_ok(q->multiplier[o], q->shift[o])) {
            return 0;
        }
    }
    for (o = 0; o < f_d->n; o++) {
        int32_t *r = rec + o * MT_TINY_RECORD;
        int32_t half[2 * 2 * MT_TINY_WORDS];
        int32_t nw = 0, nh = 0, i;
        const int32_t sh = mt_requant_sh(q->shift[o]);
        for (ky = 0; ky < f_d->h; ky++) {
            /* the pairs of kernel row ky: elements (e, e + 1) for even e are one word */
            const int32_t e0 = ky * R;
            for (g = 0; g < g4; g++) {
                r[nw++] = mt_read_s16x2(filter + mt_w16_index(o, e0 + 4 * g, f_d->n, kp));
                r[nw++] = mt_read_s16x2(filter + mt_w16_index(o, e0 + 4 * g + 2, f_d->n, kp));
            }
            if (t == 3) {
                r[nw++] = mt_read_s16x2(filter + mt_w16_index(o, e0 + 4 * g4, f_d->n, kp));
            }
            if (t != 0) {
                half[nh++] = filter[mt_w16_index(o, e0 + 4 * g4 + (t == 3 ? 2 : 0), f_d->n, kp)];
            }
            if (t == 2) {
                half[nh++] = filter[mt_w16_index(o, e0 + 4 * g4 + 2, f_d->n, kp)];
            }
        }
        for (i = 0; i < nh; i += 2) {
            r[nw++] = mt_pkhbt(half[i], i + 1 < nh ? half[i + 1] : 0);
        }
        while (nw < MT_TINY_WORDS) {
            r[nw++] = 0;
        }
        r[MT_TINY_WORDS] = bias[o];
        r[MT_TINY_WORDS + 1] = mt_requant_mult(q->multiplier[o]);
        r[MT_TINY_WORDS + 2] = mt_requant_c1(sh, zp);
        r[MT_TINY_WORDS + 3] = sh;
    }
    return zp == -128 ? 1 : 2;
}

/*
 * The columns of n pixels, MT_TINY_WORDS words each, in the order of the records: x is the first
 * pixel's first kernel row in the window, the next pixel's `step` bytes further, kernel rows
 * row_bytes apart. Unused words of a column are left as they are (zero weights meet them).
 */
static MT_NOINLINE void columns(const int8_t *x, int32_t n, int32_t step, int32_t row_bytes, int32_t kh, int32_t L,
                                int32_t off2, int32_t *col)
{
    const int32_t g4 = L >> 2;
    const int32_t t = L & 3;
    if (L == 3 && kh == 3) {
        /* 3x3 over one channel: three full pairs (x0, x2) and the x1 of each row packed */
        do {
            const int32_t v0 = mt_read_s8x4(x);
            const int32_t v1 = mt_read_s8x4(x + row_bytes);
            const int32_t v2 = mt_read_s8x4(x + 2 * row_bytes);
            col[0] = mt_sxtab16(off2, v0);
            col[1] = mt_sxtab16(off2, v1);
            col[2] = mt_sxtab16(off2, v2);
            col[3] = mt_pkhbt(mt_sxtab16_ror8(off2, v0), mt_sxtab16_ror8(off2, v1));
            col[4] = mt_sxtab16_ror8(off2, v2);
            col += MT_TINY_WORDS;
            x += step;
        } while (--n > 0);
        return;
    }
    do {
        int32_t half[2 * 2 * MT_TINY_WORDS];
        const int8_t *xr = x;
        int32_t *d = col;
        int32_t nh = 0, ky, g, i;
        for (ky = 0; ky < kh; ky++) {
            for (g = 0; g < g4; g++) {
                const int32_t v = mt_read_s8x4(xr + 4 * g);
                *d++ = mt_sxtab16(off2, v);
                *d++ = mt_sxtab16_ror8(off2, v);
            }
            if (t != 0) {
                const int32_t v = mt_read_s8x4(xr + 4 * g4);
                if (t == 3) {
                    *d++ = mt_sxtab16(off2, v);
                    half[nh++] = mt_sxtab16_ror8(off2, v);
                } else {
                    half[nh++] = mt_sxtab16(off2, v);
                    if (t == 2) {
                        half[nh++] = mt_sxtab16_ror8(off2, v);
                    }
                }
            }
            xr += row_bytes;
        }
        for (i = 0; i < nh; i += 2) {
            *d++ = mt_pkhbt(half[i], i + 1 < nh ? half[i + 1] : 0);
        }
        col += MT_TINY_WORDS;
        x += step;
    } while (--n > 0);
}

/* Where the channel loop and the pixel loop of one call stop (two words: the native code reads
   them with one LDRD). */
typedef struct {
    const int32_t *rec_end;
    const int8_t *out_end;
} run_ends;

#if defined(MT_DSP_NATIVE)

/* One output channel: the record's weights and bias (r5-r10), five SMLAD onto the bias, then the
   requantization constants (r5 multiplier, r6 c1, r7 sh). Column in r0-r4, records at r12,
   output at lr. */
#define MT_TINY_DOT                                                                                           \
    "ldm   r12!, {r5, r6, r7, r8, r9, r10}\n\t"                                                               \
    "smlad r10, r5, r0, r10\n\t"                                                                              \
    "smlad r10, r6, r1, r10\n\t"                                                                              \
    "smlad r10, r7, r2, r10\n\t"                                                                              \
    "smlad r10, r8, r3, r10\n\t"                                                                              \
    "smlad r10, r9, r4, r10\n\t"                                                                              \
    "ldm   r12!, {r5, r6, r7}\n\t"

/* mt_requantize_floor (the library's mode): prepared m in r5, c1 in r6, sh in r7; r8 scratch */
#define MT_TINY_FLOOR MT_TINY_DOT MT_ASM_REQUANT_FLOOR("r6", "r8", "r10", "r5", "r6", "r7") "strb  r6, [lr], #1\n\t"

/* mt_requantize_fast (the library's mode) */
#define MT_TINY_FAST MT_TINY_DOT MT_ASM_REQUANT_FAST("r6", "r8", "r10", "r5", "r6", "r7") "strb  r6, [lr], #1\n\t"

/*
 * run(cols, rec, out, ends): for each pixel (until out reaches ends->out_end) its column into r0-r4,
 * then every record (until ends->rec_end), four channels per loop pass. Every register is in use in
 * the channel loop, so the column pointer, the records' start and the ends wait on the stack.
 * NOTE: naked, all in assembly: the loop needs all 14 registers in a fixed order (LDM loads in
 * register order), which inline asm operands cannot express.
 */
#define MT_TINY_RUN(CH)                                                                                       \
    __asm__ volatile("push  {r4-r11, lr}\n\t"                                                                  \
                     "sub   sp, sp, #16\n\t"                                                                   \
                     "ldrd  r4, r5, [r3]\n\t"                                                                  \
                     "strd  r0, r1, [sp]\n\t"                                                                  \
                     "strd  r4, r5, [sp, #8]\n\t"                                                              \
                     "mov   lr, r2\n\t"                                                                        \
                     "1:\n\t"                                                                                  \
                     "ldr   r12, [sp]\n\t"                                                                     \
                     "ldm   r12!, {r0, r1, r2, r3, r4}\n\t"                                                    \
                     "str   r12, [sp]\n\t"                                                                     \
                     "ldrd  r12, r11, [sp, #4]\n\t"                                                            \
                     "2:\n\t" CH CH CH CH "cmp   r12, r11\n\t"                                                 \
                     "bne   2b\n\t"                                                                            \
                     "ldr   r11, [sp, #12]\n\t"                                                                \
                     "cmp   lr, r11\n\t"                                                                       \
                     "bne   1b\n\t"                                                                            \
                     "add   sp, sp, #16\n\t"                                                                   \
                     "pop   {r4-r11, pc}\n\t")

/* the arguments arrive in r0-r3 (AAPCS); a naked function never names them */
#define MT_NAKED_ARGS                                                                                         \
    const int32_t *cols __attribute__((unused)), const int32_t *rec __attribute__((unused)),                  \
        int8_t *out __attribute__((unused)), const run_ends *ends __attribute__((unused))

__attribute__((naked, noinline)) static void run_floor(MT_NAKED_ARGS)
{
    MT_TINY_RUN(MT_TINY_FLOOR);
}

__attribute__((naked, noinline)) static void run_fast(MT_NAKED_ARGS)
{
    MT_TINY_RUN(MT_TINY_FAST);
}

#else /* !MT_DSP_NATIVE: the same computation in C (emulated instructions) */

static void run_c(const int32_t *cols, const int32_t *rec, int8_t *out, const run_ends *ends, int floor_mode)
{
    do {
        const int32_t *r = rec;
        do {
            int32_t acc = r[MT_TINY_WORDS];
            int32_t i;
            for (i = 0; i < MT_TINY_WORDS; i++) {
                acc = mt_smlad(r[i], cols[i], acc);
            }
            *out++ = (int8_t)(floor_mode ? mt_requantize_floor(acc, r[6], r[8], r[7])
                                         : mt_requantize_fast(acc, r[6], r[8], r[7]));
            r += MT_TINY_RECORD;
        } while (r != ends->rec_end);
        cols += MT_TINY_WORDS;
    } while (out != ends->out_end);
}

static void run_floor(const int32_t *cols, const int32_t *rec, int8_t *out, const run_ends *ends)
{
    run_c(cols, rec, out, ends, 1);
}

static void run_fast(const int32_t *cols, const int32_t *rec, int8_t *out, const run_ends *ends)
{
    run_c(cols, rec, out, ends, 0);
}

#endif /* MT_DSP_NATIVE */

int mt_conv_tiny(const mt_conv_params *p,
                 const mt_per_channel_quant *q,
                 const mt_dims *in_d,
                 const int8_t *input,
                 const mt_dims *f_d,
                 const int16_t *filter,
                 const int32_t *bias,
                 const mt_dims *out_d,
                 int8_t *output,
                 int8_t *scratch)
{
    const int32_t o_n = f_d->n;
    int32_t *rec = (int32_t *)(void *)scratch;
    int32_t *cols = rec + MT_TINY_RECORD * o_n;
    int8_t *wbuf = (int8_t *)(cols + MT_TINY_WORDS * MT_TINY_PIXELS);
    const int32_t row_bytes = mt_conv_window_row_bytes(p, in_d, f_d, out_d->w);
    const int32_t step = p->stride_w * in_d->c;
    const int32_t zx = p->input_zero_point;
    const int32_t off2 = (int32_t)(((uint32_t)(-zx) & 0xFFFFu) | ((uint32_t)(-zx) << 16));
    const int mode = prepare(p, q, f_d, filter, bias, rec);
    void (*run)(const int32_t *, const int32_t *, int8_t *, const run_ends *) = mode == 1 ? run_floor : run_fast;
    run_ends ends;
    int32_t n, oy, ox;
    if (!mode) {
        return 0;
    }
    ends.rec_end = rec + MT_TINY_RECORD * o_n;
    memset(cols, 0, sizeof(int32_t) * MT_TINY_WORDS * MT_TINY_PIXELS);
    for (n = 0; n < in_d->n; n++) {
        mt_conv_window w;
        int8_t *y = output + n * out_d->h * out_d->w * o_n;
        mt_conv_window_init(&w, wbuf, f_d->h, 2, row_bytes, p, in_d, input + n * in_d->h * in_d->w * in_d->c);
        for (oy = 0; oy < out_d->h; oy++) {
            const int8_t *x = mt_conv_window_rows(&w, oy * p->stride_h, oy * p->stride_h + f_d->h - 1);
            for (ox = 0; ox < out_d->w; ox += MT_TINY_PIXELS) {
                const int32_t cnt = out_d->w - ox < MT_TINY_PIXELS ? out_d->w - ox : MT_TINY_PIXELS;
                columns(x + ox * step, cnt, step, row_bytes, f_d->h, f_d->w * f_d->c, off2, cols);
                ends.out_end = y + cnt * o_n;
                run(cols, rec, y, &ends);
                y += cnt * o_n;
            }
        }
    }
    return 1;
}

#else /* !MT_DSP */

/* ISO C forbids an empty translation unit. */
typedef int mt_conv_s16_tiny_unused;

#endif /* MT_DSP */
