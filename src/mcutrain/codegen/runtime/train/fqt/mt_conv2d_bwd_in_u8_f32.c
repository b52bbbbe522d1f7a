/*
 * Transposed conv of float32 errors with uint8 weights, precision mixed (Python twins:
 * fqt_kernels.conv2d_bwd_in_acc in mode "f32seq" on float32(w - z_w), then the product by s_w in
 * fqt.FQT._bwd_parametric). Order per input element: the taps (i, j) that reach it in row-major
 * order; each tap's t = sum over o of e[o] * float32(w[o, i, j, c] - z_w) from +0.0 in o order; the
 * taps added from +0.0 in order (col2im's); then one product by w_scale. Zero errors (ReLU masks,
 * pruned channels) are skipped: with finite weights their products are +-0, which leave a running
 * sum from +0.0 unchanged.
 */
#include "mt_fqt.h"

mt_status mt_conv2d_bwd_in_u8_f32(const mt_conv_params *params,
                                  int32_t w_zero_point,
                                  float w_scale,
                                  const mt_dims *output_dims,
                                  const float *e,
                                  const mt_dims *filter_dims,
                                  const uint8_t *filter,
                                  const mt_dims *input_dims,
                                  float *e_x)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t ostride = kh * kw * c_n;
    int32_t b, y, x, c;
    if (!params || !e || !filter || !e_x || params->groups != 1 || filter_dims->c != c_n || output_dims->c != o_n) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < h; ++y) {
            for (x = 0; x < w; ++x) {
                for (c = 0; c < c_n; ++c) {
                    float acc = 0.0f;
                    int32_t i, j, o;
                    for (i = 0; i < kh; ++i) {
                        const int32_t ty = y + params->pad_top - i;
                        int32_t oy;
                        if (ty < 0 || ty % params->stride_h != 0 || (oy = ty / params->stride_h) >= ho) {
                            continue;
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t tx = x + params->pad_left - j;
                            const float *pe;
                            const uint8_t *pw;
                            float t = 0.0f;
                            int32_t ox;
                            if (tx < 0 || tx % params->stride_w != 0 || (ox = tx / params->stride_w) >= wo) {
                                continue;
                            }
                            pe = e + ((b * ho + oy) * wo + ox) * o_n;
                            pw = filter + (i * kw + j) * c_n + c;
                            for (o = 0; o < o_n; ++o) {
                                if (pe[o] != 0.0f) {
                                    t += pe[o] * (float)((int32_t)pw[o * ostride] - w_zero_point);
                                }
                            }
                            acc += t;
                        }
                    }
                    e_x[((b * h + y) * w + x) * c_n + c] = acc * w_scale;
                }
            }
        }
    }
    return MT_OK;
}
