/*
 * mcutrain runtime: the argument check and reference loop shared by mt_conv2d_fwd_s8 and
 * mt_conv2d_fwd_s8_s16 (not part of the API).
 *
 * Why one body: the two kernels differ only in how a weight is stored (int8 [O, kh, kw, Cg], or
 * widened to int16 in the exported layout of mt_conv_s16.h), so the loop, the padding rule and
 * the requantization are written once; each kernel passes one constant `wide`, so each compiles to
 * the loop of its own layout.
 */
#ifndef MT_CONV_REF_H
#define MT_CONV_REF_H

#include <stdint.h>

#include "mt_arch.h"
#include "mt_conv_s16.h"
#include "mt_fixedpoint.h"
#include "mt_types.h"

/* MT_OK when the pointers are set and the shapes are a valid (grouped) conv, else MT_ERR_ARG. */
MT_INLINE mt_status mt_conv_check_args(const mt_conv_params *p,
                                       const mt_per_channel_quant *q,
                                       const mt_dims *in_d,
                                       const int8_t *input,
                                       const mt_dims *f_d,
                                       const void *filter,
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

/* Int16 elements of one padded kernel row of the widened layout: kw * Cg rounded up to four. */
MT_INLINE int32_t mt_conv_padded_row(const mt_dims *f_d)
{
    return (f_d->w * f_d->c + 3) & ~3;
}

/* Position of element e of a padded kernel row in SMLAD order: (0, 2, 1, 3) within each four. */
MT_INLINE int32_t mt_conv_smlad_pos(int32_t e)
{
    return (e & ~3) | ((e & 1) << 1) | ((e >> 1) & 1);
}

/* Element (ky, e) of weight row o of the widened layout: e in SMLAD order within padded row ky. */
MT_INLINE int32_t mt_conv_weight_s16(const int16_t *filter,
                                     const mt_dims *f_d,
                                     int32_t opg,
                                     int32_t o,
                                     int32_t ky,
                                     int32_t e)
{
    const int32_t krow4 = mt_conv_padded_row(f_d);
    return filter[mt_w16_index(o, ky * krow4 + mt_conv_smlad_pos(e), opg, f_d->h * krow4)];
}

/*
 * The reference conv (arguments checked): one accumulator per output element, padding skipped
 * (it holds z_x, so it adds (z_x - z_x) * w = 0). filter: int8 [O, kh, kw, Cg] (wide == 0) or
 * the widened int16 layout (wide == 1). NOTE: out of line, so its registers do not weigh on the
 * DSP path of the kernel that includes it; each kernel calls it with one constant `wide`, which
 * the compiler propagates into this static copy.
 */
static MT_NOINLINE void mt_conv_ref(const mt_conv_params *p,
                           const mt_per_channel_quant *q,
                           const mt_dims *in_d,
                           const int8_t *input,
                           const mt_dims *f_d,
                           const void *filter,
                           int wide,
                           const int32_t *bias,
                           const mt_dims *out_d,
                           int8_t *output)
{
    const int32_t cg = f_d->c;
    const int32_t opg = f_d->n / p->groups;
    const int32_t zx = p->input_zero_point;
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
                            if (wide) {
                                for (i = 0; i < cg; i++) {
                                    acc += ((int32_t)x[i] - zx) *
                                           mt_conv_weight_s16((const int16_t *)filter, f_d, opg, o, ky, kx * cg + i);
                                }
                            } else {
                                const int8_t *w = (const int8_t *)filter + ((o * f_d->h + ky) * f_d->w + kx) * cg;
                                MT_UNROLL_DOT
                                for (i = 0; i < cg; i++) {
                                    acc += ((int32_t)x[i] - zx) * (int32_t)w[i];
                                }
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

#endif /* MT_CONV_REF_H */
