/*
 * mcutrain runtime: mt_conv2d_bwd_w_s8_s8 and _keep (see mt_fqt_s8.h, mt_fqt_keep.h), the ARMv6-M
 * (Cortex-M0+) twins of train/fqt/mt_conv2d_bwd_w_s8_s8.c, bit-exact with them.
 *
 * The reference's order (each non-zero error of a position added into its filter's gradient:
 * the errors after ReLU are sparse, and this order skips a zero once), with the valid taps of one
 * kernel row taken as one contiguous run of (kx1 - kx0) * C bytes in both the input and the
 * gradient row (the padding clipped as in the forward twin) and the run's loop four MACs a pass
 * with e * z_x taken out of it: g += e * x - e * z_x, where the reference's loop spent 10
 * instructions a MAC and set up every tap on its own.
 * NOTE: |g| <= 127 * 255 * positions * samples < 2^31 as in the reference; each step adds the
 * exact e * (x - z_x), so every partial sum is the reference's.
 */
#include "mt_conv2d_bwd_w_s8_s8_ref.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_m0_conv.h"

/* g[k] += e * x[k] - ez for k < len (ez = e * z_x: the same e * (x[k] - z_x)). */
static void axpy_run(int32_t *g, const int8_t *x, int32_t len, int32_t e, int32_t ez)
{
    int32_t k = 0;
    for (; k + 4 <= len; k += 4) {
        const int32_t x0 = x[k], x1 = x[k + 1], x2 = x[k + 2], x3 = x[k + 3];
        g[k] += e * x0 - ez;
        g[k + 1] += e * x1 - ez;
        g[k + 2] += e * x2 - ez;
        g[k + 3] += e * x3 - ez;
    }
    for (; k < len; ++k) {
        g[k] += e * x[k] - ez;
    }
}

/* An mt_conv_bwd_w_filters_fn: the reference's loops over positions and filters, row runs inside. */
static void filters_m0(const mt_conv_params *params,
                       const int32_t *keep,
                       int32_t n,
                       const mt_dims *input_dims,
                       const int8_t *input,
                       const mt_dims *output_dims,
                       const int8_t *e,
                       const mt_dims *filter_dims,
                       int32_t *grad,
                       int32_t *grad_bias)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t zx = params->input_zero_point;
    const int32_t fstride = kh * kw * c_n, wrow = kw * c_n, xrow = w * c_n;
    int32_t b, y, x, t, i;
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            const int32_t iy0 = y * params->stride_h - params->pad_top;
            int32_t ky0, ky1;
            mt_m0_clip_window(iy0, kh, h, &ky0, &ky1);
            for (x = 0; x < wo; ++x) {
                const int32_t ix0 = x * params->stride_w - params->pad_left;
                const int8_t *pe = e + ((b * ho + y) * wo + x) * o_n;
                int32_t kx0, kx1, len, woff;
                const int8_t *px;
                mt_m0_clip_window(ix0, kw, w, &kx0, &kx1);
                len = (kx1 - kx0) * c_n;
                woff = ky0 * wrow + kx0 * c_n;
                px = input + ((b * h + iy0 + ky0) * w + ix0 + kx0) * c_n;
                for (t = 0; t < n; ++t) {
                    const int32_t o = keep ? keep[t] : t;
                    const int32_t eo = pe[o];
                    int32_t *g;
                    if (eo == 0) {
                        continue; /* exact: a zero error adds nothing */
                    }
                    grad_bias[o] += eo;
                    if (len <= 0) {
                        continue;
                    }
                    g = grad + o * fstride + woff;
                    for (i = ky0; i < ky1; ++i) {
                        axpy_run(g + (i - ky0) * wrow, px + (i - ky0) * xrow, len, eo, eo * zx);
                    }
                }
            }
        }
    }
}

mt_status mt_conv2d_bwd_w_s8_s8(const mt_conv_params *params,
                                const mt_dims *input_dims,
                                const int8_t *input,
                                const mt_dims *output_dims,
                                const int8_t *e,
                                const mt_dims *filter_dims,
                                int32_t *grad,
                                int32_t *grad_bias)
{
    return mt_conv2d_bwd_w_s8_s8_with(params, input_dims, input, output_dims, e, filter_dims, grad, grad_bias,
                                      filters_m0);
}

mt_status mt_conv2d_bwd_w_s8_s8_keep(const mt_conv_params *params,
                                     const int32_t *keep,
                                     int32_t n_keep,
                                     const mt_dims *input_dims,
                                     const int8_t *input,
                                     const mt_dims *output_dims,
                                     const int8_t *e,
                                     const mt_dims *filter_dims,
                                     int32_t *grad,
                                     int32_t *grad_bias)
{
    return mt_conv2d_bwd_w_s8_s8_keep_with(params, keep, n_keep, input_dims, input, output_dims, e, filter_dims,
                                           grad, grad_bias, filters_m0);
}
