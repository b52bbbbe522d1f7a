/*
 * mcutrain runtime: mt_conv2d_fwd_s8_s16, the 2-d convolution with weights stored widened to int16
 * (see mt_nn.h for the layout).
 *
 * Why a second conv kernel: with int8 weights every four weights cost three instructions in the
 * inner loop (LDR + 2 SXTB16). Frozen weights in Flash can be widened once, at export time, into
 * the order SMLAD wants, so the loads bring the pairs SMLAD multiplies. Each kernel row
 * (kw * Cg values) is padded with zero weights to a multiple of four, so the im2col copies whole
 * words of input per kernel row (the extra input bytes meet zero weights and add exactly 0),
 * and the rows of each pair of output channels are interleaved pair by pair (mt_conv_s16.h) so
 * one LDRD brings a pair of k for both.
 *
 * DSP twin of nn/mt_conv2d_fwd_s8_s16.c, bit-exact with it. Both DSP paths read the input
 * through a window of padded rows (dsp/mt_conv_window.c), so no pixel is a border case:
 * reductions of at most ten values take the tiny path (dsp/mt_conv_s16_tiny.c); the others an
 * im2col of three output pixels per block into interleaved int16 columns, then the 2x3 GEMM
 * (dsp/mt_mat_mult_s16_s16_3col.c). Without scratch, with unaligned weights or on a core without
 * DSP, it runs the reference body (mt_conv_ref.h). All compute the same exact integer sums.
 */
#include <stddef.h>

#include "mt_conv_ref.h"
#include "mt_conv_s16.h"
#include "mt_fixedpoint.h"
#include "mt_nn.h"
#include "mt_support.h"

#if MT_DSP
static int32_t general_size(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *f_d, const mt_dims *out_d);
#endif /* MT_DSP */

int32_t mt_conv2d_fwd_s8_s16_get_buffer_size(const mt_conv_params *params,
                                             const mt_dims *input_dims,
                                             const mt_dims *filter_dims,
                                             const mt_dims *output_dims)
{
#if MT_DSP
    const int32_t general = general_size(params, input_dims, filter_dims, output_dims);
    if (mt_conv_tiny_fits(params, filter_dims)) {
        /* the tiny path, or the general one when the requantization does not allow it */
        const int32_t tiny = mt_conv_tiny_buffer_size(params, input_dims, filter_dims, output_dims);
        return tiny > general ? tiny : general;
    }
    return general;
#else  /* !MT_DSP */
    (void)params;
    (void)input_dims;
    (void)filter_dims;
    (void)output_dims;
    return 0;
#endif /* MT_DSP */
}

#if MT_DSP

/* Window slots of the general path: a block of MT_GEMM3_COLS pixels in raster order spans two
   output rows (three when the output is one pixel wide), and no more than the padded image. */
static int32_t general_slots(const mt_conv_params *p, const mt_dims *f_d, const mt_dims *out_d)
{
    const int32_t span = f_d->h + p->stride_h * (out_d->w == 1 ? 2 : 1);
    const int32_t padded_h = (out_d->h - 1) * p->stride_h + f_d->h;
    return span < padded_h ? span : padded_h;
}

/* Scratch of the general path: the window, the three interleaved columns, the prepared
   requantization constants (16 bytes per output channel) and a block's outputs when the block
   is cut short (3 * O, rounded up to 4). */
static int32_t general_size(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *f_d, const mt_dims *out_d)
{
    return general_slots(p, f_d, out_d) * mt_conv_window_row_bytes(p, in_d, f_d, out_d->w) +
           2 * MT_GEMM3_COLS * f_d->h * mt_conv_padded_row(f_d) + 16 * f_d->n + ((MT_GEMM3_COLS * f_d->n + 3) & ~3);
}

/* What the im2col needs, read once per call. */
typedef struct {
    int32_t kh, kw, cg, c, krow4, row_bytes;
    int32_t stride_h, step_x, out_w;
    int32_t off2;
    int32_t zx;
} im2col_geom;

/* One kernel row of the three columns of a grouped conv: each pixel's kw taps of Cg values (C
   apart in the window) gathered into one run, then read by words as in im2col3. */
static MT_NOINLINE void grouped_row(const im2col_geom *m, const int8_t *const *x, int32_t *d)
{
    int8_t run[MT_S16_ROW_MAX + 4];
    int32_t j, kx, i, g;
    for (j = 0; j < MT_GEMM3_COLS; j++) {
        for (kx = 0; kx < m->kw; kx++) {
            for (i = 0; i < m->cg; i++) {
                run[kx * m->cg + i] = x[j][kx * m->c + i];
            }
        }
        for (i = m->kw * m->cg; i < m->krow4; i++) {
            run[i] = (int8_t)m->zx;
        }
        for (g = 0; g < m->krow4 >> 2; g++) {
            const int32_t v = mt_read_s8x4(run + 4 * g);
            d[2 * MT_GEMM3_COLS * g + j] = mt_sxtab16(m->off2, v);
            d[2 * MT_GEMM3_COLS * g + MT_GEMM3_COLS + j] = mt_sxtab16_ror8(m->off2, v);
        }
    }
}

/* Kernel rows per call of rows3 (its pointer table lives on the stack). */
#define MT_ROWS3_MAX 8

/* How many groups of four a kernel row has, and -z_x in both halves (one LDRD in rows3). */
typedef struct {
    int32_t groups4;
    int32_t off2;
} rows3_args;

#if defined(MT_DSP_NATIVE)

/* One group of four values of the three pixels (r0-r2): (x0, x2) and (x1, x3) of each, centred,
   stored with one STM as (lo0, lo1, lo2, hi0, hi1, hi2) at r3. */
#define MT_ROWS3_GROUP                                                                                        \
    "ldr     r7, [r0], #4\n\t"                                                                                \
    "ldr     r8, [r1], #4\n\t"                                                                                \
    "ldr     r9, [r2], #4\n\t"                                                                                \
    "sxtab16 r4, r12, r7\n\t"                                                                                 \
    "sxtab16 r7, r12, r7, ror #8\n\t"                                                                         \
    "sxtab16 r5, r12, r8\n\t"                                                                                 \
    "sxtab16 r8, r12, r8, ror #8\n\t"                                                                         \
    "sxtab16 r6, r12, r9\n\t"                                                                                 \
    "sxtab16 r9, r12, r9, ror #8\n\t"                                                                         \
    "stm     r3!, {r4, r5, r6, r7, r8, r9}\n\t"

/*
 * rows3(ptrs, a, n, d): n kernel rows of the three columns, row i's three runs at ptrs[3 i ..
 * 3 i + 2], a->groups4 words each, into d (interleaved as im2col3 describes): 10 instructions
 * per twelve values, an odd group first, then two per loop pass.
 * NOTE: naked, in assembly: STM stores in register order, which inline asm operands cannot fix.
 */
__attribute__((naked, noinline)) static void rows3(const int8_t *const *ptrs __attribute__((unused)),
                                                   const rows3_args *a __attribute__((unused)),
                                                   int32_t n __attribute__((unused)),
                                                   int32_t *d __attribute__((unused)))
{
    __asm__ volatile("push    {r4-r11, lr}\n\t"
                     "mov     r10, r0\n\t"
                     "mov     r11, r2\n\t"
                     "ldrd    r9, r12, [r1]\n\t"
                     "sub     sp, sp, #8\n\t"
                     "str     r9, [sp]\n\t"
                     "1:\n\t"
                     "ldm     r10!, {r0, r1, r2}\n\t"
                     "ldr     lr, [sp]\n\t"
                     "lsrs    lr, lr, #1\n\t"
                     "bcc     2f\n\t" MT_ROWS3_GROUP "2:\n\t"
                     "beq     4f\n\t"
                     "3:\n\t" MT_ROWS3_GROUP MT_ROWS3_GROUP "subs    lr, lr, #1\n\t"
                     "bne     3b\n\t"
                     "4:\n\t"
                     "subs    r11, r11, #1\n\t"
                     "bne     1b\n\t"
                     "add     sp, sp, #8\n\t"
                     "pop     {r4-r11, pc}\n\t");
}

#else /* !MT_DSP_NATIVE: the same copy in C (emulated instructions) */

static void rows3(const int8_t *const *ptrs, const rows3_args *a, int32_t n, int32_t *d)
{
    int32_t i, g;
    for (i = 0; i < n; i++) {
        const int8_t *r0 = ptrs[3 * i], *r1 = ptrs[3 * i + 1], *r2 = ptrs[3 * i + 2];
        for (g = 0; g < a->groups4; g++) {
            const int32_t v0 = mt_read_s8x4(r0 + 4 * g);
            const int32_t v1 = mt_read_s8x4(r1 + 4 * g);
            const int32_t v2 = mt_read_s8x4(r2 + 4 * g);
            d[0] = mt_sxtab16(a->off2, v0);
            d[1] = mt_sxtab16(a->off2, v1);
            d[2] = mt_sxtab16(a->off2, v2);
            d[3] = mt_sxtab16_ror8(a->off2, v0);
            d[4] = mt_sxtab16_ror8(a->off2, v1);
            d[5] = mt_sxtab16_ror8(a->off2, v2);
            d += 2 * MT_GEMM3_COLS;
        }
    }
}

#endif /* MT_DSP_NATIVE */

/*
 * The columns of output pixels px0 .. px0 + 2 (repeating the last one from `count` on) of the
 * image behind `win`, channels from c0, interleaved word by word: pair p of column j at word
 * 3 p + j. Each kernel row is R = krow4 bytes of the window read as words (SXTAB16 centres and
 * splits a word into the pairs (x0, x2) and (x1, x3)); for a grouped conv the row's taps are
 * first gathered (they are C apart in the window, Cg each).
 */
static MT_NOINLINE void im2col3(mt_conv_window *win, const im2col_geom *m, int32_t px0, int32_t count, int32_t c0,
                                int32_t *cols)
{
    const int8_t *ptrs[MT_GEMM3_COLS * MT_ROWS3_MAX];
    int32_t slot[MT_GEMM3_COLS], col[MT_GEMM3_COLS];
    const int32_t groups4 = m->krow4 >> 2;
    const int32_t slots = win->slots;
    const int32_t oy0 = px0 / m->out_w;
    const int32_t last = px0 + count - 1;
    const int8_t *buf = win->buf;
    rows3_args a;
    int32_t j, ky, i;
    a.groups4 = groups4;
    a.off2 = m->off2;
    mt_conv_window_rows(win, oy0 * m->stride_h, (last / m->out_w) * m->stride_h + m->kh - 1);
    for (j = 0; j < MT_GEMM3_COLS; j++) {
        const int32_t px = px0 + j < last ? px0 + j : last;
        const int32_t oy = px / m->out_w;
        slot[j] = (oy * m->stride_h) % slots;
        col[j] = (px - oy * m->out_w) * m->step_x + c0;
    }
    for (ky = 0; ky < m->kh; ky += MT_ROWS3_MAX) {
        const int32_t n = m->kh - ky < MT_ROWS3_MAX ? m->kh - ky : MT_ROWS3_MAX;
        int32_t *d = cols + ky * groups4 * 2 * MT_GEMM3_COLS;
        for (i = 0; i < n; i++) {
            for (j = 0; j < MT_GEMM3_COLS; j++) {
                /* kernel row ky + i of pixel j: the next slot of the ring */
                ptrs[MT_GEMM3_COLS * i + j] = buf + slot[j] * m->row_bytes + col[j];
                slot[j] = slot[j] + 1 == slots ? 0 : slot[j] + 1;
            }
        }
        if (m->cg != m->c) {
            for (i = 0; i < n; i++) {
                grouped_row(m, ptrs + MT_GEMM3_COLS * i, d + i * groups4 * 2 * MT_GEMM3_COLS);
            }
        } else {
            rows3(ptrs, &a, n, d);
        }
    }
}

static void conv_dsp(const mt_conv_params *p,
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
    const int32_t krow4 = mt_conv_padded_row(f_d);
    const int32_t kp = f_d->h * krow4;
    const int32_t opg = f_d->n / p->groups;
    const int32_t pixels = out_d->h * out_d->w;
    const int32_t slots = general_slots(p, f_d, out_d);
    im2col_geom m;
    int8_t *wbuf = scratch;
    int32_t *cols;
    int32_t *prep;
    int8_t *tail;
    int32_t n, g, px;
    m.kh = f_d->h;
    m.kw = f_d->w;
    m.cg = f_d->c;
    m.c = in_d->c;
    m.krow4 = krow4;
    m.row_bytes = mt_conv_window_row_bytes(p, in_d, f_d, out_d->w);
    m.stride_h = p->stride_h;
    m.step_x = p->stride_w * in_d->c;
    m.out_w = out_d->w;
    m.zx = p->input_zero_point;
    /* -z_x in both halves; SXTAB16 adds it to two sign-extended bytes at once */
    m.off2 = (int32_t)(((uint32_t)(-m.zx) & 0xFFFFu) | ((uint32_t)(-m.zx) << 16));
    cols = (int32_t *)(void *)(wbuf + slots * m.row_bytes);
    prep = cols + MT_GEMM3_COLS * (kp >> 1);
    tail = (int8_t *)(prep + 4 * f_d->n);
    for (g = 0; g < p->groups; g++) {
        mt_gemm_out qo;
        int mode;
        qo.bias = bias + g * opg;
        qo.multiplier = q->multiplier + g * opg;
        qo.shift = q->shift + g * opg;
        qo.zero_point = p->output_zero_point;
        qo.act_min = p->act_min;
        qo.act_max = p->act_max;
        mode = mt_gemm3_prepare(&qo, opg, prep);
        for (n = 0; n < in_d->n; n++) {
            mt_conv_window win;
            int8_t *y = output + n * pixels * out_d->c + g * opg;
            mt_conv_window_init(&win, wbuf, slots, 1, m.row_bytes, p, in_d,
                                input + n * in_d->h * in_d->w * in_d->c);
            for (px = 0; px < pixels; px += MT_GEMM3_COLS) {
                const int32_t count = pixels - px < MT_GEMM3_COLS ? pixels - px : MT_GEMM3_COLS;
                im2col3(&win, &m, px, count, g * f_d->c, cols);
                if (count == MT_GEMM3_COLS) {
                    mt_gemm3(filter + g * opg * kp, cols, opg, kp, &qo, prep, mode, y + px * out_d->c, out_d->c);
                } else {
                    /* the last block: all three columns into `tail`, then the valid ones out */
                    int32_t j, o;
                    mt_gemm3(filter + g * opg * kp, cols, opg, kp, &qo, prep, mode, tail, opg);
                    for (j = 0; j < count; j++) {
                        for (o = 0; o < opg; o++) {
                            y[(px + j) * out_d->c + o] = tail[j * opg + o];
                        }
                    }
                }
            }
        }
    }
}

#endif /* MT_DSP */

mt_status mt_conv2d_fwd_s8_s16(const mt_context *ctx,
                               const mt_conv_params *params,
                               const mt_per_channel_quant *quant,
                               const mt_dims *input_dims,
                               const int8_t *input,
                               const mt_dims *filter_dims,
                               const int16_t *filter,
                               const int32_t *bias,
                               const mt_dims *output_dims,
                               int8_t *output)
{
    const mt_status st =
        mt_conv_check_args(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output);
    if (st != MT_OK) {
        return st;
    }
#if MT_DSP
    /* NOTE: the GEMM reads the weights with LDRD, which needs 4-byte alignment (the exporter
       emits them in a union with an int32_t) */
    if (ctx && ctx->buf &&
        ctx->size >= mt_conv2d_fwd_s8_s16_get_buffer_size(params, input_dims, filter_dims, output_dims) &&
        ((uintptr_t)filter & 3u) == 0) {
        if (mt_conv_tiny_fits(params, filter_dims) &&
            mt_conv_tiny(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output,
                         (int8_t *)ctx->buf)) {
            return MT_OK;
        }
        conv_dsp(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output,
                 (int8_t *)ctx->buf);
        return MT_OK;
    }
#else  /* !MT_DSP */
    (void)ctx;
#endif /* MT_DSP */
    mt_conv_ref(params, quant, input_dims, input, filter_dims, filter, 1, bias, output_dims, output);
    return MT_OK;
}
