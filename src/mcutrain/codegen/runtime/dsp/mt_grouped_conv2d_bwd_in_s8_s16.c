/*
 * Transposed grouped conv (depthwise and dense included) of prescaled int16 errors with int8
 * weights (Python twin: fqt_kernels.conv2d_bwd_in_acc in mode "int", then fqt.FQT._to_err or
 * fqt.FQT._as_real).
 * DSP twin of train/fqt/mt_grouped_conv2d_bwd_in_s8_s16.c, bit-exact with it; grouped layers that
 * are not depthwise, and cores without DSP, run the reference body
 * (mt_grouped_conv2d_bwd_in_s8_s16_ref.h). A tensor with several consumers gets the float32 reals
 * (e_real) as in the reference.
 *
 * Depthwise: input position (y, x) of channel c sums e16[(y + pad - i) / s, (x + pad - j) / s, c]
 * * w[c, i, j] over the taps whose output position exists, so the taps are visited through the
 * output positions that cover (y, x): no stride test per tap. Four channels go together: their
 * weights are unpacked once per quad into int16 words (w[c], w[c + 1]) and (w[c + 2], w[c + 3])
 * per tap, the errors of four channels are two words as they lie in memory, and each tap is
 * four single MACs (SMLABB / SMLATT). The requantization to int8 is prepared once per call
 * (mt_requantize_fast_single, then the [-127, 127] clamp) and the accumulator extremes stay in
 * locals. Channels past the last quad take the plain loop.
 * NOTE: |e16 * w| <= 32512 * 127 and a depthwise sum has kh * kw <= MT_BWD_IN_TERMS products, so
 * it fits int32 in any order (the reference's int64 flush never triggers here).
 */
#include "mt_arch.h"
#include "mt_depthwise_dsp.h"
#include "mt_grouped_conv2d_bwd_in_s8_s16_ref.h"

#if MT_DSP

/* The output rows [*lo, *hi] that cover input row y (tap i = y + pad - s * o in [0, k)). */
MT_INLINE void bwd_in_covering(int32_t y, int32_t pad, int32_t s, int32_t k, int32_t n_out, int32_t *lo, int32_t *hi)
{
    const int32_t t = y + pad, first = t - k + 1;
    const int32_t last = t / s;
    *lo = first <= 0 ? 0 : (first + s - 1) / s;
    *hi = last < n_out - 1 ? last : n_out - 1;
}

/* The error requantization of one accumulator, prepared (fast) or general. */
MT_INLINE int8_t bwd_in_to_err(int32_t v, int fast, int32_t multiplier, int32_t shift, int32_t sh, int32_t c1)
{
    int32_t y;
    if (!fast) {
        return mt_requantize_single(v, multiplier, shift, 0, -127, 127);
    }
    y = mt_requantize_fast_single(v, multiplier, sh, c1);
    return (int8_t)(y < -127 ? -127 : y);
}

/* Channels [c0, c0 + 4) (or, with quad = 0, channel c0 alone) of a depthwise layer. */
MT_INLINE void bwd_in_channels(const mt_conv_params *p,
                           const mt_dims *out_d,
                           const int16_t *e16,
                           const mt_dims *f_d,
                           const int8_t *filter,
                           const mt_dims *in_d,
                           int32_t multiplier,
                           int32_t shift,
                           int8_t *e_x,
                           float s_acc,
                           float *e_real,
                           int32_t *lo,
                           int32_t *hi,
                           int32_t c0,
                           const int quad)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c;
    const int32_t kh = f_d->h, kw = f_d->w, kk = kh * kw;
    const int32_t ho = out_d->h, wo = out_d->w, sh = p->stride_h, sw = p->stride_w;
    const int fast = mt_requant_fast_ok_single(multiplier, shift);
    const int32_t rsh = -1 - shift, c1 = fast ? mt_requant_c1(rsh, 0) : 0;
    int32_t wq[2 * MT_DW_TAPS_MAX];
    int32_t vmin = *lo, vmax = *hi;
    int32_t t, n, y, x;
    int32_t r[4];
    mt_dw_used_taps(p, in_d, f_d, out_d, r);
    for (t = 0; t < kk; ++t) {
        const int8_t *f = filter + c0 * kk + t;
        if (t / kw < r[0] || t / kw >= r[1] || t % kw < r[2] || t % kw >= r[3]) {
            continue; /* a tap that links no input to an output: never read */
        }
        wq[2 * t] = quad ? (int32_t)(((uint32_t)(int32_t)f[0] & 0xFFFFu) | ((uint32_t)(int32_t)f[kk] << 16)) : f[0];
        wq[2 * t + 1] =
            quad ? (int32_t)(((uint32_t)(int32_t)f[2 * kk] & 0xFFFFu) | ((uint32_t)(int32_t)f[3 * kk] << 16)) : 0;
    }
    for (n = 0; n < in_d->n; ++n) {
        for (y = 0; y < h; ++y) {
            int32_t oy_lo, oy_hi;
            bwd_in_covering(y, p->pad_top, sh, kh, ho, &oy_lo, &oy_hi);
            for (x = 0; x < w; ++x) {
                const int32_t at = ((n * h + y) * w + x) * c_n + c0;
                int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                int32_t ox_lo, ox_hi, oy;
                bwd_in_covering(x, p->pad_left, sw, kw, wo, &ox_lo, &ox_hi);
                for (oy = oy_lo; oy <= oy_hi; ++oy) {
                    const int32_t i = y + p->pad_top - sh * oy;
                    const int16_t *pe = e16 + ((n * ho + oy) * wo + ox_lo) * c_n + c0;
                    int32_t wi = 2 * (i * kw + x + p->pad_left - sw * ox_lo); /* tap (i, j) of ox */
                    int32_t ox;
                    for (ox = ox_lo; ox <= ox_hi; ++ox, pe += c_n, wi -= 2 * sw) {
                        const int32_t *pw = wq + wi;
                        if (quad) {
                            const int32_t e01 = mt_read_s16x2(pe), e23 = mt_read_s16x2(pe + 2);
                            a0 = mt_smlabb(e01, pw[0], a0);
                            a1 = mt_smlatt(e01, pw[0], a1);
                            a2 = mt_smlabb(e23, pw[1], a2);
                            a3 = mt_smlatt(e23, pw[1], a3);
                        } else {
                            a0 += (int32_t)pe[0] * pw[0];
                        }
                    }
                }
                if (e_real) { /* a tensor with several consumers: float32(acc) * s_acc, no extremes */
                    e_real[at] = mt_s64_to_f32(a0) * s_acc;
                    if (quad) {
                        e_real[at + 1] = mt_s64_to_f32(a1) * s_acc;
                        e_real[at + 2] = mt_s64_to_f32(a2) * s_acc;
                        e_real[at + 3] = mt_s64_to_f32(a3) * s_acc;
                    }
                    continue;
                }
                vmin = a0 < vmin ? a0 : vmin;
                vmax = a0 > vmax ? a0 : vmax;
                if (quad) {
                    vmin = a1 < vmin ? a1 : vmin;
                    vmax = a1 > vmax ? a1 : vmax;
                    vmin = a2 < vmin ? a2 : vmin;
                    vmax = a2 > vmax ? a2 : vmax;
                    vmin = a3 < vmin ? a3 : vmin;
                    vmax = a3 > vmax ? a3 : vmax;
                }
                if (e_x) {
                    e_x[at] = bwd_in_to_err(a0, fast, multiplier, shift, rsh, c1);
                    if (quad) {
                        e_x[at + 1] = bwd_in_to_err(a1, fast, multiplier, shift, rsh, c1);
                        e_x[at + 2] = bwd_in_to_err(a2, fast, multiplier, shift, rsh, c1);
                        e_x[at + 3] = bwd_in_to_err(a3, fast, multiplier, shift, rsh, c1);
                    }
                }
            }
        }
    }
    *lo = vmin;
    *hi = vmax;
}

/* One out-of-line loop for the quads, one for single channels. */
static MT_NOINLINE void bwd_in_quad(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                    const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d, int32_t multiplier,
                                    int32_t shift, int8_t *e_x, float s_acc, float *e_real, int32_t *lo, int32_t *hi,
                                    int32_t c0)
{
    bwd_in_channels(p, out_d, e16, f_d, filter, in_d, multiplier, shift, e_x, s_acc, e_real, lo, hi, c0, 1);
}

static MT_NOINLINE void bwd_in_single(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                      const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d,
                                      int32_t multiplier, int32_t shift, int8_t *e_x, float s_acc, float *e_real,
                                      int32_t *lo, int32_t *hi, int32_t c)
{
    bwd_in_channels(p, out_d, e16, f_d, filter, in_d, multiplier, shift, e_x, s_acc, e_real, lo, hi, c, 0);
}
#endif /* MT_DSP */

mt_status mt_grouped_conv2d_bwd_in_s8_s16(const mt_conv_params *params,
                                          const mt_dims *output_dims,
                                          const int16_t *e16,
                                          const mt_dims *filter_dims,
                                          const int8_t *filter,
                                          const mt_dims *input_dims,
                                          int32_t multiplier,
                                          int32_t shift,
                                          int8_t *e_x,
                                          float s_acc,
                                          float *e_real,
                                          int32_t *acc_min,
                                          int32_t *acc_max)
{
#if MT_DSP
    if (params && output_dims && e16 && filter_dims && filter && input_dims && acc_min && acc_max && !(e_x && e_real) &&
        params->groups == input_dims->c && filter_dims->c == 1 && filter_dims->n == input_dims->c &&
        output_dims->c == input_dims->c && params->stride_h >= 1 && params->stride_w >= 1 &&
        filter_dims->h * filter_dims->w <= MT_DW_TAPS_MAX) {
        int32_t c;
        for (c = 0; c + 4 <= input_dims->c; c += 4) {
            bwd_in_quad(params, output_dims, e16, filter_dims, filter, input_dims, multiplier, shift, e_x, s_acc, e_real,
                        acc_min, acc_max, c);
        }
        for (; c < input_dims->c; ++c) {
            bwd_in_single(params, output_dims, e16, filter_dims, filter, input_dims, multiplier, shift, e_x, s_acc,
                          e_real, acc_min, acc_max, c);
        }
        return MT_OK;
    }
#endif /* MT_DSP */
    return mt_grouped_conv2d_bwd_in_s8_s16_ref(params, output_dims, e16, filter_dims, filter, input_dims, multiplier,
                                               shift, e_x, s_acc, e_real, acc_min, acc_max);
}
