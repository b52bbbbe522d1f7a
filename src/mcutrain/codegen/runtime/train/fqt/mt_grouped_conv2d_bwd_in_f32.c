/*
 * Transposed grouped/depthwise conv of float32 errors, precisions float32 (float32 weights) and mixed
 * (uint8 weights; Python twins: fqt_kernels.conv2d_bwd_in_acc in mode "f32seq", groups > 1, then for
 * mixed the product by s_w in fqt.FQTBackward._bwd_parametric). Order per input element:
 * - depthwise (one input channel per group; its tap loop): for each channel multiplier o in order,
 *   s_o = the products e[o] * w[o, i, j] of the taps (i, j) that reach it, from +0.0 in row-major
 *   order; then the s_o summed from +0.0 in order (seq_sum over the multiplier);
 * - other groups (im2col GEMM and col2im): per tap, t = sum over the group's output channels of
 *   e[o] * w[o, i, j, c] from +0.0 in o order; the taps added from +0.0 in order.
 * mixed multiplies the total by w_scale once. NOTE: a sum from +0.0 never becomes -0.0 (round to
 * nearest), so skipping out-of-range taps (no term at all in the twin) is exact.
 */
#include "mt_arch.h"
#include "mt_fqt.h"

/* w[idx] as float32: the float32 weight, or float32(w - z_w) of a uint8 one (exact: |w - z| <= 255). */
MT_INLINE float weight_at(const float *wf, const uint8_t *wu, int32_t zw, int32_t idx)
{
    return wf ? wf[idx] : (float)((int32_t)wu[idx] - zw);
}

MT_INLINE mt_status bwd_in(const mt_conv_params *params, const mt_dims *output_dims, const float *e,
                           const mt_dims *filter_dims, const float *wf, const uint8_t *wu, int32_t zw, float w_scale,
                           const mt_dims *input_dims, float *e_x)
{
    int32_t h, w, c_n, o_n, kh, kw, cig, opg, ho, wo, b, y, x, c;
    int depthwise;
    if (!params || !output_dims || !e || !filter_dims || (!wf && !wu) || !input_dims || !e_x || params->groups < 1 ||
        params->stride_h < 1 || params->stride_w < 1) {
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
    depthwise = params->groups > 1 && cig == 1;
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < h; ++y) {
            for (x = 0; x < w; ++x) {
                for (c = 0; c < c_n; ++c) {
                    const int32_t g = c / cig, ci = c - g * cig;
                    float total = 0.0f;
                    int32_t i, j, o, m;
                    for (m = 0; m < (depthwise ? opg : 1); ++m) { /* depthwise: one channel multiplier at a time */
                        float acc = 0.0f;
                        for (i = 0; i < kh; ++i) {
                            const int32_t ty = y + params->pad_top - i;
                            int32_t oy;
                            if (ty < 0 || ty % params->stride_h != 0 || (oy = ty / params->stride_h) >= ho) {
                                continue;
                            }
                            for (j = 0; j < kw; ++j) {
                                const int32_t tx = x + params->pad_left - j;
                                const float *pe;
                                float t = 0.0f;
                                int32_t ox;
                                if (tx < 0 || tx % params->stride_w != 0 || (ox = tx / params->stride_w) >= wo) {
                                    continue;
                                }
                                pe = e + ((b * ho + oy) * wo + ox) * o_n;
                                if (depthwise) {
                                    const int32_t oc = g * opg + m;
                                    acc += pe[oc] * weight_at(wf, wu, zw, (oc * kh + i) * kw + j);
                                    continue;
                                }
                                for (o = g * opg; o < (g + 1) * opg; ++o) {
                                    t += pe[o] * weight_at(wf, wu, zw, ((o * kh + i) * kw + j) * cig + ci);
                                }
                                acc += t;
                            }
                        }
                        total = depthwise ? total + acc : acc;
                    }
                    e_x[((b * h + y) * w + x) * c_n + c] = wf ? total : total * w_scale;
                }
            }
        }
    }
    return MT_OK;
}

mt_status mt_grouped_conv2d_bwd_in_f32(const mt_conv_params *params,
                                       const mt_dims *output_dims,
                                       const float *e,
                                       const mt_dims *filter_dims,
                                       const float *filter,
                                       const mt_dims *input_dims,
                                       float *e_x)
{
    if (!filter) {
        return MT_ERR_ARG;
    }
    return bwd_in(params, output_dims, e, filter_dims, filter, NULL, 0, 1.0f, input_dims, e_x);
}

mt_status mt_grouped_conv2d_bwd_in_u8_f32(const mt_conv_params *params,
                                          int32_t w_zero_point,
                                          float w_scale,
                                          const mt_dims *output_dims,
                                          const float *e,
                                          const mt_dims *filter_dims,
                                          const uint8_t *filter,
                                          const mt_dims *input_dims,
                                          float *e_x)
{
    if (!filter) {
        return MT_ERR_ARG;
    }
    return bwd_in(params, output_dims, e, filter_dims, NULL, filter, w_zero_point, w_scale, input_dims, e_x);
}
