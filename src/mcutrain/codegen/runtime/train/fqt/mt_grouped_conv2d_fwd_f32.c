/*
 * float32 grouped/depthwise conv forward, precision float32 (Python twins: fqt_kernels.conv2d_fwd_acc
 * in mode "f32seq", groups > 1, and act_f32): per output, acc = the sum from +0.0 over the taps (i, j)
 * in order and the group's input channels in order of x * w (taps on padding skipped: their products
 * are +-0, which leave a sum from +0.0 unchanged), then act(acc + b). A depthwise conv's tap loop and
 * a grouped conv's im2col GEMM over k = (i, j, c) both give this order.
 */
#include "mt_fqt.h"

/* act(z): 0 none, 1 relu, 2 relu6 (fqt_kernels.act_f32). */
static float act_f32(float z, int32_t act)
{
    if (act == 0) {
        return z;
    }
    z = z < 0.0f ? 0.0f : z;
    return (act == 2 && z > 6.0f) ? 6.0f : z;
}

mt_status mt_grouped_conv2d_fwd_f32(const mt_conv_params *params,
                                    int32_t act,
                                    const mt_dims *input_dims,
                                    const float *input,
                                    const mt_dims *filter_dims,
                                    const float *filter,
                                    const float *bias,
                                    const mt_dims *output_dims,
                                    float *output)
{
    int32_t h, w, c_n, o_n, kh, kw, cig, opg, ho, wo, b, y, x, o;
    if (!params || !input_dims || !input || !filter_dims || !filter || !bias || !output_dims || !output ||
        params->groups < 1 || act < 0 || act > 2) {
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
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                float *out = output + ((b * ho + y) * wo + x) * o_n;
                for (o = 0; o < o_n; ++o) {
                    const float *wr = filter + o * kh * kw * cig;
                    const int32_t c0 = (o / opg) * cig;
                    float acc = 0.0f;
                    int32_t i, j, c;
                    for (i = 0; i < kh; ++i) {
                        const int32_t iy = y * params->stride_h - params->pad_top + i;
                        if (iy < 0 || iy >= h) {
                            continue;
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t ix = x * params->stride_w - params->pad_left + j;
                            const float *px;
                            const float *pw;
                            if (ix < 0 || ix >= w) {
                                continue;
                            }
                            px = input + ((b * h + iy) * w + ix) * c_n + c0;
                            pw = wr + (i * kw + j) * cig;
                            for (c = 0; c < cig; ++c) {
                                acc += px[c] * pw[c];
                            }
                        }
                    }
                    out[o] = act_f32(acc + bias[o], act);
                }
            }
        }
    }
    return MT_OK;
}
