/*
 * Transposed conv of prescaled int16 errors with int8 weights (Python twin:
 * fqt_kernels.conv2d_bwd_in_acc in mode "int" and fqt.FQT._to_err). Each input element gathers the
 * output positions whose window covers it, so no accumulator buffer is needed.
 * NOTE: |acc| <= 32512 * 127 * (taps * O) < 2^31 is checked by the exporter (taps * O <= 520).
 */
#include "mt_fixedpoint.h"
#include "mt_fqt.h"

mt_status mt_conv2d_bwd_in_s8_s16(const mt_conv_params *params,
                                  const int32_t *channels,
                                  int32_t n_channels,
                                  const mt_dims *output_dims,
                                  const int16_t *e16,
                                  const mt_dims *filter_dims,
                                  const int8_t *filter,
                                  const mt_dims *input_dims,
                                  int32_t multiplier,
                                  int32_t shift,
                                  int8_t *e_x,
                                  int32_t *acc_min,
                                  int32_t *acc_max)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t sh = params->stride_h, sw = params->stride_w;
    int32_t b, y, x, c;
    if (!params || !e16 || !filter || !acc_min || !acc_max || params->groups != 1 || filter_dims->c != c_n) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < h; ++y) {
            for (x = 0; x < w; ++x) {
                for (c = 0; c < c_n; ++c) {
                    int32_t acc = 0;
                    int32_t i, j, o;
                    for (i = 0; i < kh; ++i) {
                        const int32_t ty = y + params->pad_top - i;
                        int32_t oy;
                        if (ty < 0 || ty % sh != 0 || (oy = ty / sh) >= ho) {
                            continue;
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t tx = x + params->pad_left - j;
                            const int16_t *pe;
                            const int8_t *pw;
                            int32_t ox;
                            if (tx < 0 || tx % sw != 0 || (ox = tx / sw) >= wo) {
                                continue;
                            }
                            pe = e16 + ((b * ho + oy) * wo + ox) * o_n;
                            pw = filter + (i * kw + j) * c_n + c;
                            if (channels) {
                                int32_t t;
                                for (t = 0; t < n_channels; ++t) {
                                    o = channels[t];
                                    acc += (int32_t)pe[o] * pw[o * kh * kw * c_n];
                                }
                            } else {
                                for (o = 0; o < o_n; ++o) {
                                    acc += (int32_t)pe[o] * pw[o * kh * kw * c_n];
                                }
                            }
                        }
                    }
                    *acc_min = acc < *acc_min ? acc : *acc_min;
                    *acc_max = acc > *acc_max ? acc : *acc_max;
                    if (e_x) {
                        e_x[((b * h + y) * w + x) * c_n + c] = mt_requantize(acc, multiplier, shift, 0, -127, 127);
                    }
                }
            }
        }
    }
    return MT_OK;
}
