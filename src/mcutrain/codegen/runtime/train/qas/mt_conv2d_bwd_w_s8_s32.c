/*
 * Exact int64 local weight gradient of a conv2d from an int32 accumulator gradient: the NP
 * gradient recovery of ZO (docs/integer-semantics.md 12.4; zo_estimator.local_weight_grad).
 * Integer sums are exact in any order, so the loops run in the order that reads memory best.
 */
#include "mt_train.h"

mt_status mt_conv2d_bwd_w_s8_s32(const mt_conv_params *params,
                                 const mt_dims *input_dims,
                                 const int8_t *input,
                                 const mt_dims *output_dims,
                                 const int32_t *g,
                                 const mt_dims *filter_dims,
                                 int64_t *grad_w,
                                 int64_t *grad_b)
{
    int32_t n;
    int32_t oy;
    int32_t ox;
    int32_t o;
    int32_t ky;
    int32_t kx;
    int32_t i;
    int32_t cg;
    int32_t og;
    int32_t kernel_size;
    if (params == NULL || input_dims == NULL || input == NULL || output_dims == NULL || g == NULL ||
        filter_dims == NULL || grad_w == NULL || params->groups < 1 || params->stride_h < 1 ||
        params->stride_w < 1 || input_dims->c % params->groups != 0 || filter_dims->n % params->groups != 0 ||
        filter_dims->c != input_dims->c / params->groups || output_dims->c != filter_dims->n ||
        output_dims->n != input_dims->n) {
        return MT_ERR_ARG;
    }
    cg = filter_dims->c;
    og = filter_dims->n / params->groups;
    kernel_size = filter_dims->h * filter_dims->w * cg;
    for (o = 0; o < filter_dims->n * kernel_size; ++o) {
        grad_w[o] = 0;
    }
    if (grad_b != NULL) {
        for (o = 0; o < filter_dims->n; ++o) {
            grad_b[o] = 0;
        }
    }
    for (n = 0; n < output_dims->n; ++n) {
        for (oy = 0; oy < output_dims->h; ++oy) {
            for (ox = 0; ox < output_dims->w; ++ox) {
                const int32_t *gp = g + (((int64_t)n * output_dims->h + oy) * output_dims->w + ox) * output_dims->c;
                for (o = 0; o < filter_dims->n; ++o) {
                    const int64_t go = gp[o];
                    const int32_t cin0 = (o / og) * cg;
                    int64_t *gw = grad_w + (int64_t)o * kernel_size;
                    if (go == 0) {
                        continue; /* masked or unperturbed outputs contribute nothing */
                    }
                    if (grad_b != NULL) {
                        grad_b[o] += go;
                    }
                    for (ky = 0; ky < filter_dims->h; ++ky) {
                        const int32_t y = oy * params->stride_h - params->pad_top + ky;
                        if (y < 0 || y >= input_dims->h) {
                            continue; /* padding: x - z_x = 0 */
                        }
                        for (kx = 0; kx < filter_dims->w; ++kx) {
                            const int32_t x = ox * params->stride_w - params->pad_left + kx;
                            const int8_t *xp;
                            int64_t *gwp;
                            if (x < 0 || x >= input_dims->w) {
                                continue;
                            }
                            xp = input + (((int64_t)n * input_dims->h + y) * input_dims->w + x) * input_dims->c + cin0;
                            gwp = gw + ((int64_t)ky * filter_dims->w + kx) * cg;
                            for (i = 0; i < cg; ++i) {
                                /* |x - z_x| <= 255, |g| < 2^31: each product < 2^39 */
                                gwp[i] += (int64_t)(xp[i] - params->input_zero_point) * go;
                            }
                        }
                    }
                }
            }
        }
    }
    return MT_OK;
}
