/*
 * Transposed conv of uint8 errors with uint8 weights (Python twin: fqt_kernels.conv2d_bwd_in_acc
 * on centred operands and fqt.FQT._to_err, precision uint8): acc = sum over taps and output channels
 * of (e - z_e)(w - z_w); extremes merged into *acc_min / *acc_max; with e_x non-NULL also
 * e_x = clamp(floor(float32(acc) * m) + z_x, 0, 255). Dense convs only.
 * NOTE: |acc| <= 255 * 255 * taps * O < 2^31 for taps * O < 33 000.
 *
 * mt_conv2d_bwd_in_u8_keep (partial updates, pruned errors at z_e) runs the same loops with the
 * reduction over the kept output channels only; every skipped term is (z_e - z_e) * w = 0, so the
 * sums, their range and the requantized errors are the dense kernel's.
 */
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_fqt_math.h"

/* Input channels summed at once per input position (their accumulators on the stack). */
#define MT_U8_BWD_IN_CHANNELS 32

/*
 * Both kernels: the reduction over output channels keep[0..n) (keep NULL: 0..n).
 * NOTE: per input position and tap, an output channel whose error is z_e (most of them: masked by
 * a ReLU or not a max pool's argmax) adds 0 to every input channel and is skipped; the others add
 * (e - z_e) * (w - z_w) along the filter's contiguous input channels. Integer sums: same bits.
 */
MT_INLINE void bwd_in_u8(const mt_conv_params *params, const int32_t *keep, int32_t n, int32_t e_zero_point,
                         int32_t w_zero_point, const mt_dims *output_dims, const uint8_t *e, const mt_dims *filter_dims,
                         const uint8_t *filter, const mt_dims *input_dims, float multiplier, int32_t out_zero_point,
                         uint8_t *e_x, int32_t *acc_min, int32_t *acc_max)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t k_row = kh * kw * c_n;
    int32_t lo = *acc_min, hi = *acc_max;
    int32_t acc[MT_U8_BWD_IN_CHANNELS];
    int32_t b, y, x, c, c0;
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < h; ++y) {
            for (x = 0; x < w; ++x) {
                for (c0 = 0; c0 < c_n; c0 += MT_U8_BWD_IN_CHANNELS) {
                    const int32_t cn = c_n - c0 < MT_U8_BWD_IN_CHANNELS ? c_n - c0 : MT_U8_BWD_IN_CHANNELS;
                    int32_t i, j, t;
                    for (c = 0; c < cn; ++c) {
                        acc[c] = 0;
                    }
                    for (i = 0; i < kh; ++i) {
                        const int32_t ty = y + params->pad_top - i;
                        int32_t oy;
                        if (ty < 0 || ty % params->stride_h != 0 || (oy = ty / params->stride_h) >= ho) {
                            continue;
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t tx = x + params->pad_left - j;
                            const uint8_t *pe;
                            const uint8_t *pw;
                            int32_t ox;
                            if (tx < 0 || tx % params->stride_w != 0 || (ox = tx / params->stride_w) >= wo) {
                                continue;
                            }
                            pe = e + ((b * ho + oy) * wo + ox) * o_n;
                            pw = filter + (i * kw + j) * c_n + c0;
                            for (t = 0; t < n; ++t) {
                                const int32_t o = keep ? keep[t] : t;
                                const int32_t ev = (int32_t)pe[o] - e_zero_point;
                                const uint8_t *pwo = pw + o * k_row;
                                if (ev == 0) {
                                    continue;
                                }
                                for (c = 0; c < cn; ++c) {
                                    acc[c] += ev * ((int32_t)pwo[c] - w_zero_point);
                                }
                            }
                        }
                    }
                    for (c = 0; c < cn; ++c) {
                        lo = acc[c] < lo ? acc[c] : lo;
                        hi = acc[c] > hi ? acc[c] : hi;
                        if (e_x) {
                            e_x[((b * h + y) * w + x) * c_n + c0 + c] =
                                (uint8_t)mt_requant_f32_floor(acc[c], multiplier, out_zero_point, 0, 255);
                        }
                    }
                }
            }
        }
    }
    *acc_min = lo;
    *acc_max = hi;
}

mt_status mt_conv2d_bwd_in_u8(const mt_conv_params *params,
                              int32_t e_zero_point,
                              int32_t w_zero_point,
                              const mt_dims *output_dims,
                              const uint8_t *e,
                              const mt_dims *filter_dims,
                              const uint8_t *filter,
                              const mt_dims *input_dims,
                              float multiplier,
                              int32_t out_zero_point,
                              uint8_t *e_x,
                              int32_t *acc_min,
                              int32_t *acc_max)
{
    if (!params || !e || !filter || !acc_min || !acc_max || params->groups != 1 ||
        filter_dims->c != input_dims->c) {
        return MT_ERR_ARG;
    }
    bwd_in_u8(params, NULL, filter_dims->n, e_zero_point, w_zero_point, output_dims, e, filter_dims, filter,
              input_dims, multiplier, out_zero_point, e_x, acc_min, acc_max);
    return MT_OK;
}

mt_status mt_conv2d_bwd_in_u8_keep(const mt_conv_params *params,
                                   const int32_t *keep,
                                   int32_t n_keep,
                                   int32_t e_zero_point,
                                   int32_t w_zero_point,
                                   const mt_dims *output_dims,
                                   const uint8_t *e,
                                   const mt_dims *filter_dims,
                                   const uint8_t *filter,
                                   const mt_dims *input_dims,
                                   float multiplier,
                                   int32_t out_zero_point,
                                   uint8_t *e_x,
                                   int32_t *acc_min,
                                   int32_t *acc_max)
{
    if (!params || !keep || !e || !filter || !acc_min || !acc_max || params->groups != 1 ||
        filter_dims->c != input_dims->c || n_keep < 0 || n_keep > filter_dims->n) {
        return MT_ERR_ARG;
    }
    bwd_in_u8(params, keep, n_keep, e_zero_point, w_zero_point, output_dims, e, filter_dims, filter, input_dims,
              multiplier, out_zero_point, e_x, acc_min, acc_max);
    return MT_OK;
}
