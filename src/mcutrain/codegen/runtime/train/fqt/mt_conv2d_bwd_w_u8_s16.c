/*
 * Seed A's per-sample uint8 weight gradient summed over a batch (Python twin: the uint8 branch of
 * fqt.FQT._weight_grad): each element g = sum over positions of (e - z_e)(x - z_x) is exact in
 * int32, its extremes merged into *g_min / *g_max, quantized q = clamp(floor(float32(g) * m) + z_g,
 * 0, 255), and the centred q - z_g added into grad16 (|sum| <= 255 * batch: int16 up to 128
 * samples); grad_bias accumulates sum (e - z_e). The quantization uses the step's fixed gradient
 * qparams, so summing the samples one at a time equals the simulator's sum over the batch.
 */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

mt_status mt_conv2d_bwd_w_u8_s16(const mt_conv_params *params,
                                 int32_t e_zero_point,
                                 const mt_dims *input_dims,
                                 const uint8_t *input,
                                 const mt_dims *output_dims,
                                 const uint8_t *e,
                                 const mt_dims *filter_dims,
                                 float multiplier,
                                 int32_t grad_zero_point,
                                 int16_t *grad16,
                                 int32_t *grad_bias,
                                 int32_t *g_min,
                                 int32_t *g_max)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t zx = params ? params->input_zero_point : 0;
    int32_t o, i, j, c, y, x;
    if (!params || !input || !e || !grad16 || !grad_bias || !g_min || !g_max || params->groups != 1 ||
        filter_dims->c != c_n || input_dims->n != 1) {
        return MT_ERR_ARG;
    }
    for (o = 0; o < o_n; ++o) {
        int32_t sb = 0;
        for (y = 0; y < ho * wo; ++y) {
            sb += (int32_t)e[y * o_n + o] - e_zero_point;
        }
        grad_bias[o] += sb;
        for (i = 0; i < kh; ++i) {
            for (j = 0; j < kw; ++j) {
                for (c = 0; c < c_n; ++c) {
                    const int32_t idx = ((o * kh + i) * kw + j) * c_n + c;
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
                                 ((int32_t)input[(iy * w + ix) * c_n + c] - zx);
                        }
                    }
                    *g_min = g < *g_min ? g : *g_min;
                    *g_max = g > *g_max ? g : *g_max;
                    grad16[idx] = (int16_t)(grad16[idx] + mt_requant_f32_floor(g, multiplier, grad_zero_point, 0, 255) -
                                            grad_zero_point);
                }
            }
        }
    }
    return MT_OK;
}
