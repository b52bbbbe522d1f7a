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

/* Both kernels: the reduction over output channels keep[0..n) (keep NULL: 0..n). */
MT_INLINE void bwd_in_u8(const mt_conv_params *params, const int32_t *keep, int32_t n, int32_t e_zero_point,
                         int32_t w_zero_point, const mt_dims *output_dims, const uint8_t *e, const mt_dims *filter_dims,
                         const uint8_t *filter, const mt_dims *input_dims, float multiplier, int32_t out_zero_point,
                         uint8_t *e_x, int32_t *acc_min, int32_t *acc_max)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    int32_t b, y, x, c;
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < h; ++y) {
            for (x = 0; x < w; ++x) {
                for (c = 0; c < c_n; ++c) {
                    int32_t acc = 0, i, j, t;
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
                            pw = filter + (i * kw + j) * c_n + c;
                            for (t = 0; t < n; ++t) {
                                const int32_t o = keep ? keep[t] : t;
                                acc += ((int32_t)pe[o] - e_zero_point) *
                                       ((int32_t)pw[o * kh * kw * c_n] - w_zero_point);
                            }
                        }
                    }
                    *acc_min = acc < *acc_min ? acc : *acc_min;
                    *acc_max = acc > *acc_max ? acc : *acc_max;
                    if (e_x) {
                        e_x[((b * h + y) * w + x) * c_n + c] =
                            (uint8_t)mt_requant_f32_floor(acc, multiplier, out_zero_point, 0, 255);
                    }
                }
            }
        }
    }
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
