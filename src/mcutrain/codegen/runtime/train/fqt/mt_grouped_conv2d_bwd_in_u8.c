/*
 * Transposed grouped/depthwise conv of uint8 errors with uint8 weights (Python twin:
 * fqt_kernels.conv2d_bwd_in_acc on centred operands, then fqt.FQTBackward._to_err or _as_real,
 * precision uint8): acc = sum over taps and the group's output channels of (e - z_e)(w - z_w),
 * extremes merged into *acc_min / *acc_max; with e_x also
 * e_x = clamp(floor(float32(acc) * m) + z_x, 0, 255), with e_real float32(acc) * s_acc (the part a
 * consumer gives a tensor with several consumers). Dense convs (groups 1) take it for that part.
 * NOTE: |acc| <= 255 * 255 * taps * (O / groups) < 2^31 for taps * O / groups < 33 000 (emit_fqt checks).
 */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

mt_status mt_grouped_conv2d_bwd_in_u8(const mt_conv_params *params,
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
                                      float s_acc,
                                      float *e_real,
                                      int32_t *acc_min,
                                      int32_t *acc_max)
{
    int32_t h, w, c_n, o_n, kh, kw, cig, opg, ho, wo, b, y, x, c;
    if (!params || !output_dims || !e || !filter_dims || !filter || !input_dims || !acc_min || !acc_max ||
        (e_x && e_real) || params->groups < 1 || params->stride_h < 1 || params->stride_w < 1) {
        return MT_ERR_ARG;
    }
    h = input_dims->h;
    w = input_dims->w;
    c_n = input_dims->c;
    o_n = filter_dims->n;
    kh = filter_dims->h;
    kw = filter_dims->w;
    cig = filter_dims->c;
    opg = o_n / params->groups;
    ho = output_dims->h;
    wo = output_dims->w;
    if (cig * params->groups != c_n || opg * params->groups != o_n || output_dims->c != o_n) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < h; ++y) {
            for (x = 0; x < w; ++x) {
                for (c = 0; c < c_n; ++c) {
                    const int32_t g = c / cig, ci = c - g * cig;
                    const int32_t idx = ((b * h + y) * w + x) * c_n + c;
                    int32_t acc = 0, i, j, o;
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
                            pe = e + ((b * ho + oy) * wo + ox) * o_n + g * opg;
                            pw = filter + ((g * opg * kh + i) * kw + j) * cig + ci;
                            for (o = 0; o < opg; ++o) {
                                acc += ((int32_t)pe[o] - e_zero_point) *
                                       ((int32_t)pw[o * kh * kw * cig] - w_zero_point);
                            }
                        }
                    }
                    *acc_min = acc < *acc_min ? acc : *acc_min;
                    *acc_max = acc > *acc_max ? acc : *acc_max;
                    if (e_x) {
                        e_x[idx] = (uint8_t)mt_requant_f32_floor(acc, multiplier, out_zero_point, 0, 255);
                    } else if (e_real) {
                        e_real[idx] = mt_s64_to_f32(acc) * s_acc;
                    }
                }
            }
        }
    }
    return MT_OK;
}
