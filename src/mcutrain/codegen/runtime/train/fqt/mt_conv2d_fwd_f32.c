/*
 * float32 conv forward, precision float32 (Python twins: fqt_kernels.conv2d_fwd_acc in mode
 * "f32seq" and act_f32): acc = sum over k = (i, j, c) of the OHWI row, in order from +0.0, of
 * x * w (taps on padding skipped: their products are +-0), then z = acc + b and the activation
 * (relu: z < 0 ? 0 : z; relu6 also 6 above; NaN passes as numpy's maximum / clip let it).
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

mt_status mt_conv2d_fwd_f32(const mt_conv_params *params,
                            int32_t act,
                            const mt_dims *input_dims,
                            const float *input,
                            const mt_dims *filter_dims,
                            const float *filter,
                            const float *bias,
                            const mt_dims *output_dims,
                            float *output)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    int32_t b, y, x, o;
    if (!params || !input || !filter || !bias || !output || params->groups != 1 || filter_dims->c != c_n ||
        output_dims->c != o_n || act < 0 || act > 2) {
        return MT_ERR_ARG;
    }
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                float *out = output + ((b * ho + y) * wo + x) * o_n;
                for (o = 0; o < o_n; ++o) {
                    const float *wr = filter + o * kh * kw * c_n;
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
                            px = input + ((b * h + iy) * w + ix) * c_n;
                            pw = wr + (i * kw + j) * c_n;
                            for (c = 0; c < c_n; ++c) {
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
