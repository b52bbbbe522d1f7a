/*
 * Transposed conv of float32 errors with float32 weights, precision float32 (Python twin:
 * fqt_kernels.conv2d_bwd_in_acc in mode "f32seq"). Order per input element: the taps (i, j) that
 * reach it in row-major order; each tap's t = sum over o of e[o] * w[o, i, j, c] from +0.0 in o
 * order; the taps added from +0.0 in order (col2im's).
 *
 * mt_conv2d_bwd_in_f32_keep (partial updates, pruned errors +0.0) keeps this order over the kept
 * channels only. NOTE: exact: a tap's sum starts at +0.0 and adding finite terms never makes it
 * -0.0 (round to nearest), and a skipped term (+0.0 * w = +-0.0) leaves +0.0 or a non-zero sum
 * unchanged.
 */
#include "mt_arch.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"

/* Both kernels: each tap's sum over output channels keep[0..n) (keep NULL: 0..n). */
MT_INLINE void bwd_in_f32(const mt_conv_params *params, const int32_t *keep, int32_t n, const mt_dims *output_dims,
                          const float *e, const mt_dims *filter_dims, const float *filter, const mt_dims *input_dims,
                          float *e_x)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t ostride = kh * kw * c_n;
    int32_t b, y, x, c;
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
                            const float *pw;
                            float t = 0.0f;
                            int32_t ox;
                            if (tx < 0 || tx % params->stride_w != 0 || (ox = tx / params->stride_w) >= wo) {
                                continue;
                            }
                            pe = e + ((b * ho + oy) * wo + ox) * o_n;
                            pw = filter + (i * kw + j) * c_n + c;
                            for (o = 0; o < n; ++o) {
                                const int32_t k = keep ? keep[o] : o;
                                t += pe[k] * pw[k * ostride];
                            }
                            acc += t;
                        }
                    }
                    e_x[((b * h + y) * w + x) * c_n + c] = acc;
                }
            }
        }
    }
}

mt_status mt_conv2d_bwd_in_f32(const mt_conv_params *params,
                               const mt_dims *output_dims,
                               const float *e,
                               const mt_dims *filter_dims,
                               const float *filter,
                               const mt_dims *input_dims,
                               float *e_x)
{
    if (!params || !e || !filter || !e_x || params->groups != 1 || filter_dims->c != input_dims->c ||
        output_dims->c != filter_dims->n) {
        return MT_ERR_ARG;
    }
    bwd_in_f32(params, NULL, filter_dims->n, output_dims, e, filter_dims, filter, input_dims, e_x);
    return MT_OK;
}

mt_status mt_conv2d_bwd_in_f32_keep(const mt_conv_params *params,
                                    const int32_t *keep,
                                    int32_t n_keep,
                                    const mt_dims *output_dims,
                                    const float *e,
                                    const mt_dims *filter_dims,
                                    const float *filter,
                                    const mt_dims *input_dims,
                                    float *e_x)
{
    if (!params || !keep || !e || !filter || !e_x || params->groups != 1 || filter_dims->c != input_dims->c ||
        output_dims->c != filter_dims->n || n_keep < 0 || n_keep > filter_dims->n) {
        return MT_ERR_ARG;
    }
    bwd_in_f32(params, keep, n_keep, output_dims, e, filter_dims, filter, input_dims, e_x);
    return MT_OK;
}
