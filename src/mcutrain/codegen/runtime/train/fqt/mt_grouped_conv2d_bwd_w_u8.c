/*
 * Seed A's per-sample uint8 weight gradient of a grouped/depthwise conv (Python twin:
 * fqt_kernels.conv2d_bwd_w_acc per sample, groups > 1, and the uint8 quantization of
 * fqt.FQTBackward._weight_grad): each element g = sum over positions of (e - z_e)(x - z_x) is exact in
 * int32, its extremes merged into *g_min / *g_max, and quantized q = clamp(floor(float32(g) * m) + z_g,
 * 0, 255): stored into grad (batch 1) or q - z_g added into grad16 (|sum| <= 255 * batch: int16 up to
 * 128 samples). Either way grad_bias accumulates sum (e - z_e); with both NULL only the extremes are
 * found (a gradient range's first pass). One sample per call.
 * NOTE: |g| <= 255 * 255 * Ho * Wo < 2^31 for Ho * Wo < 33 000 (emit_fqt checks).
 */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

mt_status mt_grouped_conv2d_bwd_w_u8(const mt_conv_params *params,
                                     int32_t e_zero_point,
                                     const mt_dims *input_dims,
                                     const uint8_t *input,
                                     const mt_dims *output_dims,
                                     const uint8_t *e,
                                     const mt_dims *filter_dims,
                                     float multiplier,
                                     int32_t grad_zero_point,
                                     uint8_t *grad,
                                     int16_t *grad16,
                                     int32_t *grad_bias,
                                     int32_t *g_min,
                                     int32_t *g_max)
{
    int32_t h, w, c_n, o_n, kh, kw, cig, opg, ho, wo, zx, o, i, j, c, y, x;
    if (!params || !input_dims || !input || !output_dims || !e || !filter_dims || !grad_bias || !g_min ||
        !g_max || (grad && grad16) || params->groups < 1 || input_dims->n != 1) {
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
    zx = params->input_zero_point;
    if (cig * params->groups != c_n || opg * params->groups != o_n || output_dims->c != o_n) {
        return MT_ERR_ARG;
    }
    for (o = 0; o < o_n; ++o) {
        const int32_t c0 = (o / opg) * cig; /* the group's first input channel */
        if (grad || grad16) {
            int32_t sb = 0;
            for (y = 0; y < ho * wo; ++y) {
                sb += (int32_t)e[y * o_n + o] - e_zero_point;
            }
            grad_bias[o] += sb;
        }
        for (i = 0; i < kh; ++i) {
            for (j = 0; j < kw; ++j) {
                for (c = 0; c < cig; ++c) {
                    const int32_t idx = ((o * kh + i) * kw + j) * cig + c;
                    int32_t g = 0;
                    for (y = 0; y < ho; ++y) {
                        const int32_t iy = y * params->stride_h - params->pad_top + i;
                        if (iy < 0 || iy >= h) {
                            continue;
                        }
                        for (x = 0; x < wo; ++x) {
                            const int32_t ix = x * params->stride_w - params->pad_left + j;
                            if (ix < 0 || ix >= w) {
                                continue;
                            }
                            g += ((int32_t)e[(y * wo + x) * o_n + o] - e_zero_point) *
                                 ((int32_t)input[(iy * w + ix) * c_n + c0 + c] - zx);
                        }
                    }
                    *g_min = g < *g_min ? g : *g_min;
                    *g_max = g > *g_max ? g : *g_max;
                    if (grad) {
                        grad[idx] = (uint8_t)mt_requant_f32_floor(g, multiplier, grad_zero_point, 0, 255);
                    } else if (grad16) {
                        grad16[idx] = (int16_t)(grad16[idx] +
                                                mt_requant_f32_floor(g, multiplier, grad_zero_point, 0, 255) -
                                                grad_zero_point);
                    }
                }
            }
        }
    }
    return MT_OK;
}
