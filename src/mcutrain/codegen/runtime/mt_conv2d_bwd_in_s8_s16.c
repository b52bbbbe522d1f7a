/*
 * Transposed conv of prescaled int16 errors with int8 weights (Python twin:
 * fqt_kernels.conv2d_bwd_in_acc in mode "int" and fqt.FQT._to_err). Each input position gathers the
 * output positions whose window covers it, for a block of input channels at once (contiguous
 * weights, zero errors skipped), so no accumulator buffer beyond the stack block is needed.
 * NOTE: |acc| <= 32512 * 127 * (taps * O) < 2^31 is checked by the exporter (taps * O <= 520).
 */
#include "mt_fixedpoint.h"
#include "mt_fqt.h"

#define MT_BWD_IN_BLOCK 32 /* input channels summed at once: 128 bytes of int32 on the stack */

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
                int32_t c0;
                for (c0 = 0; c0 < c_n; c0 += MT_BWD_IN_BLOCK) { /* a block of input channels at a time */
                    const int32_t cb = c_n - c0 < MT_BWD_IN_BLOCK ? c_n - c0 : MT_BWD_IN_BLOCK;
                    int32_t acc[MT_BWD_IN_BLOCK];
                    int32_t i, j, t;
                    for (c = 0; c < cb; ++c) {
                        acc[c] = 0;
                    }
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
                            pw = filter + (i * kw + j) * c_n + c0;
                            for (t = 0; t < (channels ? n_channels : o_n); ++t) {
                                const int32_t o = channels ? channels[t] : t;
                                const int32_t ev = pe[o];
                                const int8_t *wr = pw + o * kh * kw * c_n;
                                if (ev == 0) {
                                    continue; /* exact: a zero error adds nothing (errors after ReLU masks) */
                                }
                                for (c = 0; c < cb; ++c) { /* contiguous weights of tap (i, j) */
                                    acc[c] += ev * wr[c];
                                }
                            }
                        }
                    }
                    for (c = 0; c < cb; ++c) {
                        const int32_t v = acc[c];
                        *acc_min = v < *acc_min ? v : *acc_min;
                        *acc_max = v > *acc_max ? v : *acc_max;
                        if (e_x) {
                            e_x[((b * h + y) * w + x) * c_n + c0 + c] =
                                mt_requantize(v, multiplier, shift, 0, -127, 127);
                        }
                    }
                }
            }
        }
    }
    return MT_OK;
}
