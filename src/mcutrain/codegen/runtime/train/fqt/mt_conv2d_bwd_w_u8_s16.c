/*
 * Seed A's per-sample uint8 weight gradient summed over a batch (Python twin: the uint8 branch of
 * fqt.FQT._weight_grad): each element g = sum over positions of (e - z_e)(x - z_x) is exact in
 * int32, its extremes merged into *g_min / *g_max, quantized q = clamp(floor(float32(g) * m) + z_g,
 * 0, 255), and the centred q - z_g added into grad16 (|sum| <= 255 * batch: int16 up to 128
 * samples); grad_bias accumulates sum (e - z_e). The quantization uses the step's fixed gradient
 * qparams, so summing the samples one at a time equals the simulator's sum over the batch.
 */
#include "mt_fqt.h"
#include "mt_conv2d_bwd_w_u8_tap.h"
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
    const int32_t c_n = input_dims ? input_dims->c : 0;
    const int32_t o_n = filter_dims ? filter_dims->n : 0, kh = filter_dims ? filter_dims->h : 0;
    const int32_t kw = filter_dims ? filter_dims->w : 0;
    int32_t o, i, j, c, c0, y, lo, hi;
    int32_t g[MT_U8_TAP_CHANNELS];
    if (!params || !input || !e || !grad16 || !grad_bias || !g_min || !g_max || params->groups != 1 ||
        filter_dims->c != c_n || input_dims->n != 1) {
        return MT_ERR_ARG;
    }
    lo = *g_min;
    hi = *g_max;
    for (o = 0; o < o_n; ++o) {
        int32_t sb = 0;
        for (y = 0; y < output_dims->h * output_dims->w; ++y) {
            sb += (int32_t)e[y * o_n + o] - e_zero_point;
        }
        grad_bias[o] += sb;
        for (i = 0; i < kh; ++i) {
            for (j = 0; j < kw; ++j) {
                for (c0 = 0; c0 < c_n; c0 += MT_U8_TAP_CHANNELS) {
                    const int32_t cn = c_n - c0 < MT_U8_TAP_CHANNELS ? c_n - c0 : MT_U8_TAP_CHANNELS;
                    int16_t *dst = grad16 + ((o * kh + i) * kw + j) * c_n + c0;
                    mt_conv2d_bwd_w_u8_tap(params, e_zero_point, input_dims, input, output_dims, e, o_n, o, i, j, c0,
                                           cn, g);
                    for (c = 0; c < cn; ++c) {
                        lo = g[c] < lo ? g[c] : lo;
                        hi = g[c] > hi ? g[c] : hi;
                        dst[c] = (int16_t)(dst[c] + mt_requant_f32_floor(g[c], multiplier, grad_zero_point, 0, 255) -
                                           grad_zero_point);
                    }
                }
            }
        }
    }
    *g_min = lo;
    *g_max = hi;
    return MT_OK;
}
