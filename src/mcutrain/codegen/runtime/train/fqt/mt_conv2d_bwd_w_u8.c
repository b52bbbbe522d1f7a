/*
 * Seed A's per-sample uint8 weight gradient of a dense conv (Python twin: fqt_kernels.conv2d_bwd_w_acc
 * per sample and the uint8 quantization of fqt.FQT._weight_grad): each element
 * g = sum over positions of (e - z_e)(x - z_x) is computed exactly in int32 (one sample: batch 1),
 * its extremes merged into *g_min / *g_max, and with grad non-NULL stored as
 * clamp(floor(float32(g) * m) + z_g, 0, 255); that pass also adds the bias gradient sum (e - z_e)
 * into grad_bias. No int32 gradient buffer is needed once the gradient range is known.
 *
 * mt_conv2d_bwd_w_u8_keep (partial updates) runs the same row loop over the kept filters only. A
 * pruned row's errors are z_e, so every one of its sums is 0: when any row is pruned, 0 joins the
 * range as it does in the dense kernel; pruned rows of grad and grad_bias are not written (the
 * masked update does not read them).
 */
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_conv2d_bwd_w_u8_tap.h"
#include "mt_fqt_math.h"

/* The gradients and bias sums of filters keep[0..n) (keep NULL: filters 0..n), for both kernels. */
MT_INLINE void bwd_w_u8_rows(const mt_conv_params *params, const int32_t *keep, int32_t n, int32_t e_zero_point,
                             const mt_dims *input_dims, const uint8_t *input, const mt_dims *output_dims,
                             const uint8_t *e, const mt_dims *filter_dims, float multiplier, int32_t grad_zero_point,
                             uint8_t *grad, int32_t *grad_bias, int32_t *g_min, int32_t *g_max)
{
    const int32_t c_n = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w;
    const int32_t positions = output_dims->h * output_dims->w;
    int32_t lo = *g_min, hi = *g_max;
    int32_t t, i, j, c, c0, y;
    int32_t g[MT_U8_TAP_CHANNELS];
    for (t = 0; t < n; ++t) {
        const int32_t o = keep ? keep[t] : t;
        if (grad) {
            int32_t sb = 0;
            for (y = 0; y < positions; ++y) {
                sb += (int32_t)e[y * o_n + o] - e_zero_point;
            }
            grad_bias[o] += sb;
        }
        for (i = 0; i < kh; ++i) {
            for (j = 0; j < kw; ++j) {
                for (c0 = 0; c0 < c_n; c0 += MT_U8_TAP_CHANNELS) {
                    const int32_t cn = c_n - c0 < MT_U8_TAP_CHANNELS ? c_n - c0 : MT_U8_TAP_CHANNELS;
                    uint8_t *dst = grad ? grad + ((o * kh + i) * kw + j) * c_n + c0 : NULL;
                    mt_conv2d_bwd_w_u8_tap(params, e_zero_point, input_dims, input, output_dims, e, o_n, o, i, j, c0,
                                           cn, g);
                    for (c = 0; c < cn; ++c) {
                        lo = g[c] < lo ? g[c] : lo;
                        hi = g[c] > hi ? g[c] : hi;
                        if (dst) {
                            dst[c] = (uint8_t)mt_requant_f32_floor(g[c], multiplier, grad_zero_point, 0, 255);
                        }
                    }
                }
            }
        }
    }
    *g_min = lo;
    *g_max = hi;
}

mt_status mt_conv2d_bwd_w_u8(const mt_conv_params *params,
                             int32_t e_zero_point,
                             const mt_dims *input_dims,
                             const uint8_t *input,
                             const mt_dims *output_dims,
                             const uint8_t *e,
                             const mt_dims *filter_dims,
                             float multiplier,
                             int32_t grad_zero_point,
                             uint8_t *grad,
                             int32_t *grad_bias,
                             int32_t *g_min,
                             int32_t *g_max)
{
    if (!params || !input || !e || !grad_bias || !g_min || !g_max || params->groups != 1 ||
        filter_dims->c != input_dims->c || input_dims->n != 1) {
        return MT_ERR_ARG;
    }
    bwd_w_u8_rows(params, NULL, filter_dims->n, e_zero_point, input_dims, input, output_dims, e, filter_dims,
                  multiplier, grad_zero_point, grad, grad_bias, g_min, g_max);
    return MT_OK;
}

mt_status mt_conv2d_bwd_w_u8_keep(const mt_conv_params *params,
                                  const int32_t *keep,
                                  int32_t n_keep,
                                  int32_t e_zero_point,
                                  const mt_dims *input_dims,
                                  const uint8_t *input,
                                  const mt_dims *output_dims,
                                  const uint8_t *e,
                                  const mt_dims *filter_dims,
                                  float multiplier,
                                  int32_t grad_zero_point,
                                  uint8_t *grad,
                                  int32_t *grad_bias,
                                  int32_t *g_min,
                                  int32_t *g_max)
{
    if (!params || !keep || !input || !e || !grad_bias || !g_min || !g_max || params->groups != 1 ||
        filter_dims->c != input_dims->c || input_dims->n != 1 || n_keep < 0 || n_keep > filter_dims->n) {
        return MT_ERR_ARG;
    }
    if (n_keep < filter_dims->n) { /* the pruned rows' sums */
        *g_min = 0 < *g_min ? 0 : *g_min;
        *g_max = 0 > *g_max ? 0 : *g_max;
    }
    bwd_w_u8_rows(params, keep, n_keep, e_zero_point, input_dims, input, output_dims, e, filter_dims, multiplier,
                  grad_zero_point, grad, grad_bias, g_min, g_max);
    return MT_OK;
}
