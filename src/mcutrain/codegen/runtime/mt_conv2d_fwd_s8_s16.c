/*
 * mcutrain runtime: mt_conv2d_fwd_s8_s16, the 2-d convolution with weights stored widened to int16
 * (see mt_nn.h for the layout).
 *
 * Why a second conv kernel: with int8 weights every four weights cost three instructions in the
 * inner loop (LDR + 2 SXTB16). Frozen weights in Flash can be widened once, at export time, into
 * the order SMLAD wants, so one LDRD brings four of them: the 1x7 block then costs 22
 * instructions per 28 MACs instead of 24. Each kernel row (kw * Cg values) is padded with zero
 * weights to a multiple of four, so the im2col copies whole words of input per kernel row (the
 * extra input bytes meet zero weights and add exactly 0) and the GEMM needs no tail loop.
 *
 * Reference path: one accumulator per output element, as mt_conv2d_fwd_s8. DSP path: im2col of
 * seven output pixels per call into int16 columns (centred, SMLAD order, interleaved), then one
 * weight row at a time against the seven columns. Both compute the same exact integer sums.
 */
#include <stddef.h>

#include "mt_conv_s16.h"
#include "mt_fixedpoint.h"
#include "mt_nn.h"
#include "mt_support.h"

/* Int16 elements of one padded kernel row: kw * Cg rounded up to a multiple of four. */
static int32_t padded_row(const mt_dims *f_d)
{
    return (f_d->w * f_d->c + 3) & ~3;
}

int32_t mt_conv2d_fwd_s8_s16_get_buffer_size(const mt_conv_params *params,
                                             const mt_dims *input_dims,
                                             const mt_dims *filter_dims,
                                             const mt_dims *output_dims)
{
#if MT_DSP
    /* the seven interleaved int16 columns of one block, then the prepared requantization
       constants (4 int32 per output channel) */
    const int32_t general = 2 * MT_GEMM_COLS * filter_dims->h * padded_row(filter_dims) + 16 * filter_dims->n;
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

/* Position of element e of a padded kernel row in SMLAD order: (0, 2, 1, 3) within each four. */
static int32_t smlad_pos(int32_t e)
{
    return (e & ~3) | ((e & 1) << 1) | ((e >> 1) & 1);
}

static void conv_ref(const mt_conv_params *p,
                     const mt_per_channel_quant *q,
                     const mt_dims *in_d,
                     const int8_t *input,
                     const mt_dims *f_d,
                     const int16_t *filter,
                     const int32_t *bias,
                     const mt_dims *out_d,
                     int8_t *output)
{
    const int32_t cg = f_d->c;
    const int32_t opg = f_d->n / p->groups;
    const int32_t zx = p->input_zero_point;
    const int32_t krow4 = padded_row(f_d);
    int32_t n, oy, ox, o;
    for (n = 0; n < in_d->n; n++) {
        for (oy = 0; oy < out_d->h; oy++) {
            for (ox = 0; ox < out_d->w; ox++) {
                int8_t *y = output + ((n * out_d->h + oy) * out_d->w + ox) * out_d->c;
                for (o = 0; o < f_d->n; o++) {
                    const int32_t c0 = (o / opg) * cg;
                    int32_t acc = bias[o];
                    int32_t ky, kx, i;
                    for (ky = 0; ky < f_d->h; ky++) {
                        const int32_t iy = oy * p->stride_h - p->pad_top + ky;
                        const int16_t *w = filter + (o * f_d->h + ky) * krow4;
                        if (iy < 0 || iy >= in_d->h) {
                            continue;
                        }
                        for (kx = 0; kx < f_d->w; kx++) {
                            const int32_t ix = ox * p->stride_w - p->pad_left + kx;
                            const int8_t *x;
                            if (ix < 0 || ix >= in_d->w) {
                                continue;
                            }
                            x = input + ((n * in_d->h + iy) * in_d->w + ix) * in_d->c + c0;
                            /* NOTE: |acc| <= |bias| + 255 * sum|w| < 2^31 (checked at export) */
                            for (i = 0; i < cg; i++) {
                                acc += ((int32_t)x[i] - zx) * (int32_t)w[smlad_pos(kx * cg + i)];
                            }
                        }
                    }
                    y[o] = mt_requantize(acc, q->multiplier[o], q->shift[o], p->output_zero_point, p->act_min,
                                         p->act_max);
                }
            }
        }
    }
}

#if MT_DSP

#if defined(__GNUC__)
#define MT_NOINLINE __attribute__((noinline))
#else
#define MT_NOINLINE
#endif /* __GNUC__ */

/* What the im2col needs, read once per call into one place (stores through the int16 columns may
   alias anything, so fields read in the loops would be reloaded after every store anyway). */
typedef struct {
    int32_t in_h, in_w, in_c, img_bytes;
    int32_t kh, kw, cg, krow4;
    int32_t stride_h, stride_w, pad_top, pad_left, out_w;
    int32_t zx, off2;
    int32_t whole; /* ungrouped: a kernel row's taps are one run of kw * C bytes */
} im2col_geom;

/* Groups of one column are this many int16 apart in the interleaved block. */
#define MT_STEP (4 * MT_GEMM_COLS)

/*
 * n > 0 groups of four int8 from x (any alignment) centred (off2 = -z_x in both halves) into
 * SMLAD-order int16 at d, d + MT_STEP, ...; returns the next d. Native: LDR, 2 SXTAB16, one
 * STRD (d is 4-byte aligned) and the loop, 6 instructions per four values.
 */
MT_INLINE int16_t *copy_groups(const int8_t *x, int16_t *d, int32_t n, int32_t off2)
{
#if defined(MT_DSP_NATIVE)
    int32_t v, lo, hi;
    if (__builtin_constant_p(n) && n == 1) {
        __asm__ volatile("ldr     %[v], [%[x]]\n\t"
                         "sxtab16 %[lo], %[o], %[v]\n\t"
                         "sxtab16 %[hi], %[o], %[v], ror #8\n\t"
                         "strd    %[lo], %[hi], [%[d]], %[st]\n\t"
                         : [d] "+r"(d), [v] "=&r"(v), [lo] "=&r"(lo), [hi] "=&r"(hi)
                         : [x] "r"(x), [o] "r"(off2), [st] "i"(2 * MT_STEP)
                         : "memory");
        return d;
    }
    __asm__ volatile("1:\n\t"
                     "ldr     %[v], [%[x]], #4\n\t"
                     "sxtab16 %[lo], %[o], %[v]\n\t"
                     "sxtab16 %[hi], %[o], %[v], ror #8\n\t"
                     "strd    %[lo], %[hi], [%[d]], %[st]\n\t"
                     "subs    %[n], %[n], #1\n\t"
                     "bne     1b\n\t"
                     : [x] "+r"(x), [d] "+r"(d), [n] "+r"(n), [v] "=&r"(v), [lo] "=&r"(lo), [hi] "=&r"(hi)
                     : [o] "r"(off2), [st] "i"(2 * MT_STEP)
                     : "cc", "memory");
#else  /* !MT_DSP_NATIVE */
    do {
        const int32_t v = mt_read_s8x4(x);
        mt_write_s16x2(d, mt_sxtab16(off2, v));
        mt_write_s16x2(d + 2, mt_sxtab16_ror8(off2, v));
        x += 4;
        d += MT_STEP;
    } while (--n > 0);
#endif /* MT_DSP_NATIVE */
    return d;
}

/* Longest padded kernel row gathered through the stack buffer of row_by_taps (the exporter's
   widened layers have kh * R <= 256). */
#define MT_GATHER_MAX 256

/*
 * One padded kernel row of one column, tap by tap (padding, borders, grouped convs): `d` points
 * at the row's first group of the column's slot. A row outside the image is zeros. With Cg a
 * multiple of four every tap is whole groups (word copies, or zeros for a padding tap); else the
 * row's bytes are gathered with z_x for padding taps and the tail (both centre to 0), then
 * copied by words.
 */
static MT_NOINLINE void row_by_taps(const im2col_geom *m, const int8_t *img, int32_t iy, int32_t ix0, int32_t c0,
                                    int16_t *d)
{
    const int32_t cg = m->cg;
    const int32_t kw = m->kw;
    const int32_t zx = m->zx;
    int32_t e, kx, i;
    if (iy < 0 || iy >= m->in_h) {
        for (e = 0; e < m->krow4; e += 4) {
            mt_write_s16x2(d, 0);
            mt_write_s16x2(d + 2, 0);
            d += MT_STEP;
        }
        return;
    }
    if ((cg & 3) == 0) {
        for (kx = 0; kx < kw; kx++) {
            const int32_t ix = ix0 + kx;
            if (ix >= 0 && ix < m->in_w) {
                d = copy_groups(img + (iy * m->in_w + ix) * m->in_c + c0, d, cg >> 2, m->off2);
            } else {
                for (i = 0; i < cg; i += 4) {
                    mt_write_s16x2(d, 0);
                    mt_write_s16x2(d + 2, 0);
                    d += MT_STEP;
                }
            }
        }
        return;
    }
    if (m->krow4 <= MT_GATHER_MAX) {
        int8_t buf[MT_GATHER_MAX + 4];
        e = 0;
        for (kx = 0; kx < kw; kx++) {
            const int32_t ix = ix0 + kx;
            const int in = ix >= 0 && ix < m->in_w;
            /* written as a select (x is only read for an in-range tap) so that the compiler does
               not call memcpy / memset for a few bytes */
            const int8_t *x = in ? img + (iy * m->in_w + ix) * m->in_c + c0 : buf;
            for (i = 0; i < cg; i++) {
                buf[e++] = in ? x[i] : (int8_t)zx;
            }
        }
        /* the tail (fewer than four bytes) as one word: buf has four spare bytes */
        mt_write_s8x4(buf + e, (int32_t)(((uint32_t)zx & 0xFFu) * 0x01010101u));
        copy_groups(buf, d, m->krow4 >> 2, m->off2);
        return;
    }
    /* rows too long for the buffer: zeros, then the values one by one at their places */
    for (e = 0; e < m->krow4; e += 4) {
        mt_write_s16x2(d + MT_STEP * (e >> 2), 0);
        mt_write_s16x2(d + MT_STEP * (e >> 2) + 2, 0);
    }
    for (kx = 0; kx < kw; kx++) {
        const int32_t ix = ix0 + kx;
        const int8_t *x;
        if (ix < 0 || ix >= m->in_w) {
            continue;
        }
        x = img + (iy * m->in_w + ix) * m->in_c + c0;
        for (i = 0; i < cg; i++) {
            e = kx * cg + i;
            d[MT_STEP * (e >> 2) + smlad_pos(e & 3)] = (int16_t)((int32_t)x[i] - zx);
        }
    }
}

/*
 * Columns of r consecutive output pixels of one output row, every kernel row inside the image:
 * the first pixel's rows start at x, the next pixel's step_x bytes further; slot by slot from d.
 */
static void columns_inside(const int8_t *x, int16_t *d, int32_t r, const im2col_geom *m, int32_t step_x)
{
    const int32_t kh = m->kh;
    const int32_t groups = m->krow4 >> 2;
    const int32_t row_bytes = m->in_w * m->in_c;
    const int32_t off2 = m->off2;
    int32_t ky;
    if (groups == 1) {
        /* tiny rows (kw * Cg <= 4, e.g. 3x3 over one channel): no inner loop */
        do {
            const int8_t *xr = x;
            int16_t *dr = d;
            ky = kh;
            do {
                dr = copy_groups(xr, dr, 1, off2);
                xr += row_bytes;
            } while (--ky != 0);
            x += step_x;
            d += 4;
        } while (--r != 0);
        return;
    }
    do {
        const int8_t *xr = x;
        int16_t *dr = d;
        ky = kh;
        do {
            dr = copy_groups(xr, dr, groups, off2);
            xr += row_bytes;
        } while (--ky != 0);
        x += step_x;
        d += 4;
    } while (--r != 0);
}

/* min(a, b) */
static int32_t min_s32(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

/*
 * The MT_GEMM_COLS interleaved columns (mt_support.h layout, padded kernel rows) of output pixels
 * px0 .. px0 + count - 1 of image `img`, channels from c0; slots from `count` on repeat the
 * last pixel. Runs of pixels whose kernel rows all lie inside the image go through
 * columns_inside (word copies only); the others kernel row by kernel row through row_by_taps.
 */
static MT_NOINLINE void im2col_block(const im2col_geom *m, const int8_t *img, int32_t px0, int32_t count,
                                     int32_t c0, int16_t *cols)
{
    const int32_t row_bytes = m->in_w * m->in_c;
    const int32_t out_w = m->out_w;
    const int32_t sw = m->stride_w;
    const int32_t step_x = sw * m->in_c;
    /* whole-word rows need an ungrouped conv (a kernel row's taps are one run) and all taps of
       the row in range: 0 <= ix0 <= x_hi */
    const int32_t x_hi = m->whole ? m->in_w - m->kw : -1;
    /* last start of a pixel's first kernel row whose kh whole-word rows stay inside the image:
       a padded row reads krow4 - kw * Cg bytes past its run (the next pixels' values, which
       meet zero weights) */
    const int32_t last = m->img_bytes - m->krow4 - (m->kh - 1) * row_bytes;
    int32_t oy = px0 / out_w;
    int32_t ox = px0 - oy * out_w;
    int32_t j = 0;
    while (j < MT_GEMM_COLS) {
        const int32_t iy0 = oy * m->stride_h - m->pad_top;
        const int32_t ix0 = ox * sw - m->pad_left;
        const int32_t off = iy0 * row_bytes + ix0 * m->in_c;
        int32_t r = 1;
        if (j >= count) {
            /* slots past the last pixel repeat it: copy the finished column */
            const int16_t *src = cols + 4 * (count - 1);
            int32_t e;
            for (e = 0; e < m->kh * m->krow4; e += 4) {
                mt_write_s16x2(cols + 4 * j + e * MT_GEMM_COLS, mt_read_s16x2(src + e * MT_GEMM_COLS));
                mt_write_s16x2(cols + 4 * j + e * MT_GEMM_COLS + 2, mt_read_s16x2(src + e * MT_GEMM_COLS + 2));
            }
        } else if (ix0 >= 0 && ix0 <= x_hi && off >= 0 && off <= last) {
            /* this pixel and the next r - 1 of its output row, up to the first that is not inside */
            r = min_s32(min_s32(count - j, out_w - ox), (x_hi - ix0) / sw + 1);
            r = min_s32(r, (last - off) / step_x + 1);
            columns_inside(img + off, cols + 4 * j, r, m, step_x);
        } else {
            int16_t *d = cols + 4 * j;
            int32_t ky;
            for (ky = 0; ky < m->kh; ky++) {
                row_by_taps(m, img, iy0 + ky, ix0, c0, d);
                d += MT_STEP * (m->krow4 >> 2);
            }
        }
        j += r;
        ox += r;
        if (ox >= out_w) {
            ox -= out_w;
            oy++;
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
                     int16_t *cols)
{
    const int32_t krow4 = padded_row(f_d);
    const int32_t kp = f_d->h * krow4;
    const int32_t opg = f_d->n / p->groups;
    const int32_t pixels = out_d->h * out_d->w;
    /* the prepared constants follow the columns (4-byte aligned: 14 * kp bytes, kp % 4 == 0) */
    int32_t *prep = (int32_t *)(void *)(cols + MT_GEMM_COLS * kp);
    im2col_geom m;
    int32_t n, g, px;
    m.in_h = in_d->h;
    m.in_w = in_d->w;
    m.in_c = in_d->c;
    m.img_bytes = in_d->h * in_d->w * in_d->c;
    m.kh = f_d->h;
    m.kw = f_d->w;
    m.cg = f_d->c;
    m.krow4 = krow4;
    m.stride_h = p->stride_h;
    m.stride_w = p->stride_w;
    m.pad_top = p->pad_top;
    m.pad_left = p->pad_left;
    m.out_w = out_d->w;
    m.zx = p->input_zero_point;
    /* -z_x in both halves; SXTAB16 adds it to two sign-extended bytes at once */
    m.off2 = (int32_t)(((uint32_t)(-m.zx) & 0xFFFFu) | ((uint32_t)(-m.zx) << 16));
    m.whole = f_d->c == in_d->c;
    for (g = 0; g < p->groups; g++) {
        mt_gemm_out qo;
        int32_t fast;
        qo.bias = bias + g * opg;
        qo.multiplier = q->multiplier + g * opg;
        qo.shift = q->shift + g * opg;
        qo.zero_point = p->output_zero_point;
        qo.act_min = p->act_min;
        qo.act_max = p->act_max;
        fast = mt_gemm_prepare_s16(&qo, opg, prep);
        for (n = 0; n < in_d->n; n++) {
            const int8_t *img = input + n * m.img_bytes;
            for (px = 0; px < pixels; px += MT_GEMM_COLS) {
                const int32_t count = pixels - px < MT_GEMM_COLS ? pixels - px : MT_GEMM_COLS;
                im2col_block(&m, img, px, count, g * f_d->c, cols);
                mt_mat_mult_s16_s16_7col(filter + g * opg * kp, cols, opg, kp, &qo, fast ? prep : NULL,
                                         output + (n * pixels + px) * out_d->c + g * opg, out_d->c, count);
            }
        }
    }
}

#endif /* MT_DSP */

static mt_status check_args(const mt_conv_params *p,
                            const mt_per_channel_quant *q,
                            const mt_dims *in_d,
                            const int8_t *input,
                            const mt_dims *f_d,
                            const int16_t *filter,
                            const int32_t *bias,
                            const mt_dims *out_d,
                            const int8_t *output)
{
    if (!p || !q || !q->multiplier || !q->shift || !in_d || !input || !f_d || !filter || !bias || !out_d ||
        !output) {
        return MT_ERR_ARG;
    }
    if (p->groups < 1 || p->stride_h < 1 || p->stride_w < 1 || p->pad_top < 0 || p->pad_left < 0 ||
        in_d->c % p->groups != 0 || f_d->n % p->groups != 0 || f_d->c * p->groups != in_d->c ||
        out_d->c != f_d->n || out_d->n != in_d->n || out_d->h < 1 || out_d->w < 1) {
        return MT_ERR_ARG;
    }
    return MT_OK;
}

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
        check_args(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output);
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
                 (int16_t *)ctx->buf);
        return MT_OK;
    }
#else  /* !MT_DSP */
    (void)ctx;
#endif /* MT_DSP */
    conv_ref(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output);
    return MT_OK;
}
